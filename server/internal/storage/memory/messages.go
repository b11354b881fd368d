package memory

import (
	"context"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

func (s messageStore) Post(_ context.Context, ref storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	if err := s.d.sealedErr(storage.OpMessagePost, ref); err != nil {
		return nil, err
	}
	q := s.d.lock(ref, true)
	defer q.mu.Unlock()
	// Again under the queue's lock: a seal may have come in between.
	if err := s.d.sealedErr(storage.OpMessagePost, ref); err != nil {
		return nil, err
	}
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
	var marker uint64
	byID := false
	if opts.Marker != "" {
		var err error
		if marker, err = strconv.ParseUint(opts.Marker, 10, 64); err != nil {
			if !storage.IsMessageID(opts.Marker) {
				return nil, "", storage.E(storage.OpMessageList, storage.Invalid, storage.ErrMarker)
			}
			byID = true
		}
	}
	if err := s.d.gone(storage.OpMessageList, ref); err != nil {
		return nil, "", err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, "", nil
	}
	defer q.mu.Unlock()
	now := s.d.clock.Now()
	transit := s.d.transitMessages(ref, now)
	if byID {
		// A message id marker: resume after that message, or from the start
		// when it is gone.
		if m, ok := q.msgs[opts.Marker]; ok {
			marker = m.seq
		}
		for _, m := range transit {
			if m.ID == opts.Marker {
				marker = uint64(m.Seq)
			}
		}
	}
	start := q.after(marker)
	out := make([]storage.Message, 0, min(opts.Limit, len(q.order)-start+len(transit)))
	var last uint64
	i := start
	// The scan is bounded like the Redis driver's: a page whose filters skip
	// many messages ends early with a marker, instead of holding the queue's
	// lock over the whole queue.
	scanned := 0
	for ; i < len(q.order) && len(out) < opts.Limit && scanned < listScanBudget; i++ {
		m := q.order[i]
		last = m.seq
		scanned++
		if m.gone || !listed(opts, now, m.clientID, m.claim != nil, m.delayUntil) {
			continue
		}
		out = append(out, m.snapshot())
	}
	// A batch in transit sorts after everything left here (Take takes the
	// newest): the listing goes on into it, or a caller that goes on to the
	// target would skip it.
	j := 0
	if i == len(q.order) {
		for ; j < len(transit) && len(out) < opts.Limit && scanned < listScanBudget; j++ {
			m := transit[j]
			if uint64(m.Seq) <= marker {
				continue
			}
			last = uint64(m.Seq)
			scanned++
			if listed(opts, now, m.ClientID, m.ClaimID != "", m.DelayUntil) {
				out = append(out, m.Message)
			}
		}
	}
	// A full page may be followed by more, and so may a page cut short by
	// the scan budget; the next page starts after the last message looked at.
	if len(out) == opts.Limit || i < len(q.order) || j < len(transit) {
		return out, strconv.FormatUint(last, 10), nil
	}
	return out, "", nil
}

// listed reports whether a listing with opts shows a live message.
func listed(opts storage.ListMessagesOptions, now time.Time, clientID string, claimed bool, delayUntil time.Time) bool {
	return (opts.Echo || clientID != opts.ClientID) && (opts.IncludeClaimed || !claimed) &&
		(opts.IncludeDelayed || !delayUntil.After(now))
}

// listScanBudget bounds how many messages one listing looks at.
const listScanBudget = 1000

func (s messageStore) Get(_ context.Context, ref storage.QueueRef, id string) (storage.Message, error) {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	var m *message
	if q != nil {
		m = q.msgs[id]
	}
	if m == nil {
		if err := s.d.named(storage.OpMessageGet, ref, id); err != nil {
			return storage.Message{}, err
		}
		return storage.Message{}, storage.E(storage.OpMessageGet, storage.NotFound, storage.ErrNoMessage)
	}
	return m.snapshot(), nil
}

func (s messageStore) GetMany(_ context.Context, ref storage.QueueRef, ids []string) ([]storage.Message, error) {
	if err := s.d.gone(storage.OpMessageGetMany, ref); err != nil {
		return nil, err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, nil
	}
	defer q.mu.Unlock()
	out := make([]storage.Message, 0, len(ids))
	for _, id := range ids {
		if m := q.msgs[id]; m != nil {
			out = append(out, m.snapshot())
		} else if err := s.d.named(storage.OpMessageGetMany, ref, id); storage.Is(err, storage.Unavailable) {
			return nil, err // in transit; moved ones are the target's to answer
		}
	}
	return out, nil
}

func (s messageStore) Delete(ctx context.Context, ref storage.QueueRef, id, claimID string) error {
	_, err := s.Remove(ctx, ref, id, claimID)
	return err
}

// Remove is Delete, also saying whether this call removed the message.
func (s messageStore) Remove(_ context.Context, ref storage.QueueRef, id, claimID string) (bool, error) {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	var m *message
	if q != nil {
		m = q.msgs[id]
	}
	if m == nil {
		return false, s.d.named(storage.OpMessageDelete, ref, id)
	}
	if err := checkClaim(q, m, claimID); err != nil {
		return false, err
	}
	q.remove(m)
	return true, nil
}

// checkClaim applies Zaqar's rule for deleting one message: a claimed
// message needs its claim's id (403 without one or with another live
// claim's, 400 with one that does not exist), and a claim id given for a
// message no claim holds is a client error too, because the caller
// evidently lost its claim.
func checkClaim(q *queue, m *message, claimID string) error {
	switch {
	case m.claim != nil && claimID == "":
		return storage.E(storage.OpMessageDelete, storage.Forbidden, storage.ErrClaimed)
	case m.claim != nil && m.claim.id != claimID && q.claims[claimID] != nil:
		return storage.E(storage.OpMessageDelete, storage.Forbidden, storage.ErrClaimed)
	case m.claim != nil && m.claim.id != claimID:
		return storage.E(storage.OpMessageDelete, storage.Invalid, storage.ErrNotHolder)
	case m.claim == nil && claimID != "":
		return storage.E(storage.OpMessageDelete, storage.Invalid, storage.ErrNotClaimed)
	}
	return nil
}

func (s messageStore) DeleteMany(_ context.Context, ref storage.QueueRef, ids []string, claimID string) error {
	if err := s.d.gone(storage.OpMessageDeleteMany, ref); err != nil {
		return err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil
	}
	defer q.mu.Unlock()
	// Nothing is deleted while any id is in transit; ids that moved are
	// the target's to delete, so the caller is sent on after the rest.
	var moved error
	for _, id := range ids {
		if q.msgs[id] == nil {
			switch err := s.d.named(storage.OpMessageDeleteMany, ref, id); {
			case storage.Is(err, storage.Unavailable):
				return err
			case err != nil:
				moved = err
			}
		}
	}
	for _, id := range ids {
		m := q.msgs[id]
		if m == nil || (m.claim != nil && m.claim.id != claimID) {
			continue
		}
		q.remove(m)
	}
	return moved
}

func (s messageStore) Pop(_ context.Context, ref storage.QueueRef, limit int) ([]storage.Message, error) {
	if err := s.d.gone(storage.OpMessagePop, ref); err != nil {
		return nil, err
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
	if len(out) == 0 {
		return nil, s.d.busy(storage.OpMessagePop, ref)
	}
	return out, nil
}
