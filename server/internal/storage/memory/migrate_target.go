package memory

import (
	"context"
	"sort"
	"time"

	"sluice.dev/server/internal/storage"
)

// The target's part in a move: Prepare, Import, Done.

func (s migrationStore) Prepare(_ context.Context, ref storage.QueueRef, meta storage.Metadata, floor int64) error {
	// A tombstone of an earlier move away goes: the queue comes back.
	if mv := s.d.moveOf(ref); mv != nil {
		s.d.mvMu.Lock()
		if !mv.tombUntil.IsZero() {
			s.d.forget(ref)
		}
		s.d.mvMu.Unlock()
	}
	q, made := s.d.lockNew(ref, true)
	defer q.mu.Unlock()
	if made {
		q.meta = meta.Clone()
	}
	if floor > 0 && uint64(floor) > q.seq {
		q.seq = uint64(floor)
	}
	return nil
}

func (s migrationStore) Import(_ context.Context, ref storage.QueueRef, b storage.Batch) error {
	q := s.d.lock(ref, true)
	defer q.mu.Unlock()
	mv := s.d.record(ref)
	s.d.mvMu.Lock()
	defer s.d.mvMu.Unlock()
	if mv.imported == nil {
		mv.imported = map[string]bool{}
	}
	now := s.d.clock.Now()
	claims := map[string]*claim{}
	var placed []*message
	for _, c := range b.Claims {
		if !mv.imported[c.ID] && c.Expires.After(now) {
			claims[c.ID] = &claim{id: c.ID, ttl: c.TTL, grace: c.Grace, created: c.Created, expires: c.Expires, pos: -1}
		}
		mv.imported[c.ID] = true
	}
	for _, mm := range b.Messages {
		if mv.imported[mm.ID] {
			continue
		}
		mv.imported[mm.ID] = true
		if q.msgs[mm.ID] != nil || !mm.Created.Add(mm.TTL).After(now) {
			continue
		}
		m := &message{
			id: mm.ID, seq: uint64(mm.Seq), body: mm.Body, clientID: mm.ClientID,
			created: mm.Created, expires: mm.Created.Add(mm.TTL), delayUntil: mm.DelayUntil,
			claimCount: mm.ClaimCount, pos: [nSlots]int{-1, -1, -1},
		}
		q.place(m, claims[mm.ClaimID], now)
		placed = append(placed, m)
	}
	q.merge(placed)
	for _, c := range claims {
		if len(c.msgs) > 0 {
			sort.Slice(c.msgs, func(i, j int) bool { return c.msgs[i].seq < c.msgs[j].seq })
			q.claims[c.id] = c
			q.byExp.push(c)
		}
	}
	return nil
}

// place stores an imported message, held by c when c is not nil; merge
// then puts the batch's messages into order.
func (q *queue) place(m *message, c *claim, now time.Time) {
	if m.seq > q.seq {
		q.seq = m.seq
	}
	q.msgs[m.id] = m
	q.expiry.push(m)
	if m.delayUntil.After(now) {
		q.delayed.push(m)
	}
	switch {
	case c != nil:
		m.claim = c
		c.msgs = append(c.msgs, m)
		q.claimed++
	case !m.delayUntil.After(now):
		q.ready.push(m)
	}
}

func (s migrationStore) Done(_ context.Context, ref storage.QueueRef) error {
	mv := s.d.moveOf(ref)
	if mv == nil {
		return nil
	}
	s.d.mvMu.Lock()
	defer s.d.mvMu.Unlock()
	mv.imported = nil
	if mv.target == "" {
		s.d.forget(ref)
	}
	return nil
}

// merge puts imported messages into order at their seqs, in one pass: a
// move imports its batches newest first, so each lands before the last.
func (q *queue) merge(ms []*message) {
	if len(ms) == 0 {
		return
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	out := make([]*message, 0, len(q.order)+len(ms))
	i := 0
	for _, m := range q.order {
		for i < len(ms) && ms[i].seq < m.seq {
			out = append(out, ms[i])
			i++
		}
		out = append(out, m)
	}
	q.order = append(out, ms[i:]...)
}
