package memory

import (
	"context"
	"strconv"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

func (s messageStore) Post(_ context.Context, ref storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	if len(msgs) == 0 {
		return nil, storage.E("messages.post", storage.Invalid, "no messages")
	}
	for _, nm := range msgs {
		if nm.TTL <= 0 {
			return nil, storage.E("messages.post", storage.Invalid, "message ttl must be positive")
		}
	}
	q := s.d.lock(ref, true)
	defer q.mu.Unlock()
	now := s.d.clock.Now()
	ids := make([]string, len(msgs))
	made := make([]*message, len(msgs))
	for i, nm := range msgs {
		m := &message{
			id:       storage.NewID(),
			body:     append([]byte(nil), nm.Body...), // the caller may reuse its buffer
			clientID: clientID,
			created:  now,
			expires:  now.Add(nm.TTL),
		}
		if nm.Delay > 0 {
			m.delayUntil = now.Add(nm.Delay)
		}
		q.insert(m, now)
		ids[i] = m.id
		made[i] = m
	}
	s.d.notif.record(ref, made, now)
	return ids, nil
}

func (s messageStore) List(_ context.Context, ref storage.QueueRef, opts storage.ListMessagesOptions) ([]storage.Message, string, error) {
	if opts.Limit <= 0 {
		return nil, "", storage.E("messages.list", storage.Invalid, "limit must be positive")
	}
	var marker uint64
	byID := false
	if opts.Marker != "" {
		var err error
		if marker, err = strconv.ParseUint(opts.Marker, 10, 64); err != nil {
			if !storage.IsMessageID(opts.Marker) {
				return nil, "", storage.E("messages.list", storage.Invalid, "malformed marker")
			}
			byID = true
		}
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, "", nil
	}
	defer q.mu.Unlock()
	if byID {
		// A message id marker: resume after that message, or from the start
		// when it is gone.
		if m, ok := q.msgs[opts.Marker]; ok {
			marker = m.seq
		}
	}
	now := s.d.clock.Now()
	start := q.after(marker)
	out := make([]storage.Message, 0, min(opts.Limit, len(q.order)-start))
	var last uint64
	i := start
	// The scan is bounded like the Redis driver's: a page whose filters skip
	// many messages ends early with a marker, instead of holding the queue's
	// lock over the whole queue.
	for scanned := 0; i < len(q.order) && len(out) < opts.Limit && scanned < listScanBudget; i++ {
		m := q.order[i]
		last = m.seq
		scanned++
		switch {
		case m.gone,
			!opts.Echo && m.clientID == opts.ClientID,
			!opts.IncludeClaimed && m.claim != nil,
			!opts.IncludeDelayed && m.delayUntil.After(now):
			continue
		}
		out = append(out, m.snapshot())
	}
	// A full page may be followed by more, and so may a page cut short by
	// the scan budget; the next page starts after the last message looked at.
	if len(out) == opts.Limit || i < len(q.order) {
		return out, strconv.FormatUint(last, 10), nil
	}
	return out, "", nil
}

// listScanBudget bounds how many messages one listing looks at.
const listScanBudget = 1000

func (s messageStore) Get(_ context.Context, ref storage.QueueRef, id string) (storage.Message, error) {
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.Message{}, storage.E("messages.get", storage.NotFound, "no such message")
	}
	defer q.mu.Unlock()
	m := q.msgs[id]
	if m == nil {
		return storage.Message{}, storage.E("messages.get", storage.NotFound, "no such message")
	}
	return m.snapshot(), nil
}

func (s messageStore) GetMany(_ context.Context, ref storage.QueueRef, ids []string) ([]storage.Message, error) {
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, nil
	}
	defer q.mu.Unlock()
	out := make([]storage.Message, 0, len(ids))
	for _, id := range ids {
		if m := q.msgs[id]; m != nil {
			out = append(out, m.snapshot())
		}
	}
	return out, nil
}

func (s messageStore) Delete(_ context.Context, ref storage.QueueRef, id, claimID string) error {
	q := s.d.lock(ref, false)
	if q == nil {
		return nil
	}
	defer q.mu.Unlock()
	m := q.msgs[id]
	if m == nil {
		return nil
	}
	if err := checkClaim(m, claimID); err != nil {
		return err
	}
	q.remove(m)
	return nil
}

// checkClaim applies Zaqar's rule for deleting one message: a claimed
// message needs its claim's id (403 without, 400 with another), and a claim
// id given for a message no claim holds is a client error too, because the
// caller evidently lost its claim.
func checkClaim(m *message, claimID string) error {
	switch {
	case m.claim != nil && claimID == "":
		return storage.E("messages.delete", storage.Forbidden, "message is claimed; a claim id is required")
	case m.claim != nil && m.claim.id != claimID:
		return storage.E("messages.delete", storage.Invalid, "message is held by another claim")
	case m.claim == nil && claimID != "":
		return storage.E("messages.delete", storage.Invalid, "message is not claimed by this claim")
	}
	return nil
}

func (s messageStore) DeleteMany(_ context.Context, ref storage.QueueRef, ids []string, claimID string) error {
	q := s.d.lock(ref, false)
	if q == nil {
		return nil
	}
	defer q.mu.Unlock()
	for _, id := range ids {
		m := q.msgs[id]
		if m == nil || (m.claim != nil && m.claim.id != claimID) {
			continue
		}
		q.remove(m)
	}
	return nil
}

func (s messageStore) Pop(_ context.Context, ref storage.QueueRef, limit int) ([]storage.Message, error) {
	if limit <= 0 {
		return nil, storage.E("messages.pop", storage.Invalid, "limit must be positive")
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, nil
	}
	defer q.mu.Unlock()
	var out []storage.Message
	for len(out) < limit && q.ready.Len() > 0 {
		m := q.ready.pop()
		out = append(out, m.snapshot())
		q.remove(m)
	}
	return out, nil
}
