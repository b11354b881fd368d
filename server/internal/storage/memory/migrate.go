package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"sluice.dev/server/internal/storage"
)

// move is a queue's part in a move (docs/pooling.md, "Moving a queue"):
// on a source the seal, the batch in transit, the ids moved and, after
// Finish, the tombstone; on a target the ids imported. It lives beside the
// queue, in Driver.moves, because a queue that does not exist can be sealed
// and a tombstone outlives its queue. Fields are guarded by Driver.mvMu;
// changes that must be atomic with the queue's messages are made while the
// queue's lock is held too (always taken first).
type move struct {
	target string         // sealed to ("" on a target)
	sealed storage.Sealed // what Seal reported, reported again
	taken  bool           // a batch was taken: no way back

	transit *storage.Batch
	inTrans map[string]bool // message and claim ids of transit
	moved   map[string]bool // message and claim ids settled

	tombUntil time.Time // after Finish: every call answers Moved until then

	imported map[string]bool // target: message and claim ids imported
}

// Migrations returns the driver's part in moving a queue.
func (d *Driver) Migrations() storage.MigrationStore { return migrationStore{d} }

// moveOf returns the queue's move record, or nil. A lapsed tombstone is
// forgotten here. The common case, no move anywhere, costs one atomic load.
func (d *Driver) moveOf(ref storage.QueueRef) *move {
	if d.nMoves.Load() == 0 {
		return nil
	}
	d.mvMu.Lock()
	defer d.mvMu.Unlock()
	mv := d.moves[ref]
	if mv != nil && !mv.tombUntil.IsZero() && !mv.tombUntil.After(d.clock.Now()) {
		d.forget(ref)
		return nil
	}
	return mv
}

// forget drops a move record; d.mvMu must be held.
func (d *Driver) forget(ref storage.QueueRef) {
	if _, ok := d.moves[ref]; ok {
		delete(d.moves, ref)
		d.nMoves.Add(-1)
	}
}

// record returns the queue's move record, making it if needed.
func (d *Driver) record(ref storage.QueueRef) *move {
	d.mvMu.Lock()
	defer d.mvMu.Unlock()
	mv := d.moves[ref]
	if mv == nil {
		mv = &move{}
		d.moves[ref] = mv
		d.nMoves.Add(1)
	}
	return mv
}

// movedErr is the answer of a source that no longer serves a call.
func movedErr(op, target string) error {
	return storage.E(op, storage.Conflict, storage.Moved{Target: target})
}

// movingErr is the answer to a call that meets a batch in transit.
func movingErr(op string) error { return storage.E(op, storage.Unavailable, storage.ErrMoving) }

// answer looks at the queue's move record under its lock; a queue that
// never moved answers nothing.
func (d *Driver) answer(ref storage.QueueRef, pick func(*move) error) error {
	mv := d.moveOf(ref)
	if mv == nil {
		return nil
	}
	d.mvMu.Lock()
	defer d.mvMu.Unlock()
	return pick(mv)
}

// gone answers Moved when the queue left this backend (a tombstone).
func (d *Driver) gone(op string, ref storage.QueueRef) error {
	return d.answer(ref, func(mv *move) error {
		if !mv.tombUntil.IsZero() {
			return movedErr(op, mv.target)
		}
		return nil
	})
}

// sealedErr answers Moved when posts go elsewhere (sealed or tombstone).
func (d *Driver) sealedErr(op string, ref storage.QueueRef) error {
	return d.answer(ref, func(mv *move) error {
		if mv.target != "" {
			return movedErr(op, mv.target)
		}
		return nil
	})
}

// busy answers Moving while a batch is in transit, for a claim or pop that
// found no free message here: the caller would go on to the target, past
// the batch. One that found some keeps them, as everything left here sorts
// before the batch. The queue's lock must be held.
func (d *Driver) busy(op string, ref storage.QueueRef) error {
	return d.answer(ref, func(mv *move) error {
		if mv.transit != nil {
			return movingErr(op)
		}
		return nil
	})
}

// transitMessages returns the messages of the batch in transit still alive
// at now, oldest first, a lapsed claim read as none (nil when none). Listings
// and stats show them after everything left here, the newest part of what
// this backend holds. The queue's lock must be held.
func (d *Driver) transitMessages(ref storage.QueueRef, now time.Time) []storage.MovedMessage {
	mv := d.moveOf(ref)
	if mv == nil {
		return nil
	}
	d.mvMu.Lock()
	defer d.mvMu.Unlock()
	if mv.transit == nil {
		return nil
	}
	var out []storage.MovedMessage
	for _, m := range slices.Backward(mv.transit.Messages) { // a batch comes newest first
		if !m.Created.Add(m.TTL).After(now) {
			continue
		}
		if !m.ClaimExpires.After(now) {
			m.ClaimID, m.ClaimExpires = "", time.Time{}
		}
		out = append(out, m)
	}
	return out
}

// named says where a message or claim id this backend does not hold went:
// Moving while in transit, Moved once settled, nil when it never moved.
// The queue's lock must be held (or the queue absent).
func (d *Driver) named(op string, ref storage.QueueRef, id string) error {
	return d.answer(ref, func(mv *move) error {
		switch {
		case mv.inTrans[id]:
			return movingErr(op)
		case mv.moved[id] || !mv.tombUntil.IsZero():
			return movedErr(op, mv.target)
		}
		return nil
	})
}

type migrationStore struct{ d *Driver }

// StorageID: a memory driver is a storage of its own, named by its address.
func (m migrationStore) StorageID(context.Context) (string, error) {
	return fmt.Sprintf("memory:%p", m.d), nil
}

func (s migrationStore) Seal(_ context.Context, ref storage.QueueRef, target string) (storage.Sealed, error) {
	if target == "" {
		return storage.Sealed{}, storage.E(storage.OpMigrateSeal, storage.Invalid, "no target")
	}
	// The queue's lock orders the seal after any post already under way;
	// a post that creates the queue afterwards finds the seal (see Post).
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	mv := s.d.record(ref)
	s.d.mvMu.Lock()
	defer s.d.mvMu.Unlock()
	switch {
	case mv.target == target:
		return mv.sealed, nil
	case mv.target != "":
		return storage.Sealed{}, storage.E(storage.OpMigrateSeal, storage.Conflict, storage.Moved{Target: mv.target})
	}
	mv.target = target
	if q != nil {
		mv.sealed = storage.Sealed{Seq: int64(q.seq), Metadata: q.meta.Clone(), Exists: true}
	} else {
		mv.sealed = storage.Sealed{Metadata: storage.Metadata{}}
	}
	return mv.sealed, nil
}

func (s migrationStore) Unseal(_ context.Context, ref storage.QueueRef) error {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	return s.d.answer(ref, func(mv *move) error {
		if mv.taken {
			return storage.E(storage.OpMigrateUnseal, storage.Conflict, "messages were taken; the move can only go forward")
		}
		s.d.forget(ref)
		return nil
	})
}

func (s migrationStore) Take(_ context.Context, ref storage.QueueRef, limit int) (storage.Batch, error) {
	if limit < 1 {
		return storage.Batch{}, storage.E(storage.OpMigrateTake, storage.Invalid, storage.ErrArgument)
	}
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	mv := s.d.moveOf(ref)
	if mv == nil {
		return storage.Batch{}, storage.E(storage.OpMigrateTake, storage.Conflict, "the queue is not sealed")
	}
	s.d.mvMu.Lock()
	defer s.d.mvMu.Unlock()
	if mv.target == "" {
		return storage.Batch{}, storage.E(storage.OpMigrateTake, storage.Conflict, "the queue is not sealed")
	}
	if mv.transit != nil {
		return *mv.transit, nil
	}
	if q == nil || len(q.msgs) == 0 {
		return storage.Batch{}, nil
	}
	b := q.take(limit)
	mv.taken = true
	mv.transit = &b
	mv.inTrans = map[string]bool{}
	for _, m := range b.Messages {
		mv.inTrans[m.ID] = true
	}
	for _, c := range b.Claims {
		mv.inTrans[c.ID] = true
	}
	return b, nil
}

// take removes the newest limit live messages and every claim holding any
// of them, and returns them. A batch is always a suffix of the queue: when
// a claim also holds older messages, every message from its oldest one on
// comes too, so what stays here still sorts before everything moved.
func (q *queue) take(limit int) storage.Batch {
	picked := map[*message]bool{}
	claims := map[*claim]bool{}
	lowest := uint64(math.MaxUint64) // every message from this seq on must come
	for i := len(q.order) - 1; i >= 0; i-- {
		m := q.order[i]
		if m.gone {
			continue
		}
		if len(picked) >= limit && m.seq < lowest {
			break
		}
		picked[m] = true
		if c := m.claim; c != nil && !claims[c] {
			claims[c] = true
			for _, cm := range c.msgs {
				if !cm.gone && cm.claim == c && cm.seq < lowest {
					lowest = cm.seq
				}
			}
		}
	}
	var b storage.Batch
	for c := range claims {
		b.Claims = append(b.Claims, storage.MovedClaim{ID: c.id, TTL: c.ttl, Grace: c.grace, Created: c.created, Expires: c.expires})
		q.byExp.remove(c)
		delete(q.claims, c.id)
	}
	for m := range picked {
		b.Messages = append(b.Messages, storage.MovedMessage{Message: m.snapshot(), Seq: int64(m.seq)})
	}
	for m := range picked {
		q.remove(m)
	}
	sort.Slice(b.Messages, func(i, j int) bool { return b.Messages[i].Seq > b.Messages[j].Seq })
	sort.Slice(b.Claims, func(i, j int) bool { return b.Claims[i].ID < b.Claims[j].ID })
	return b
}

func (s migrationStore) InTransit(_ context.Context, ref storage.QueueRef) (storage.Batch, error) {
	mv := s.d.moveOf(ref)
	if mv == nil {
		return storage.Batch{}, nil
	}
	s.d.mvMu.Lock()
	defer s.d.mvMu.Unlock()
	if mv.transit == nil {
		return storage.Batch{}, nil
	}
	return *mv.transit, nil
}

func (s migrationStore) Settle(_ context.Context, ref storage.QueueRef, b storage.Batch) error {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	return s.d.answer(ref, func(mv *move) error {
		if mv.transit == nil {
			return nil // settled before: the mover resumed after settling
		}
		for _, m := range b.Messages {
			if !mv.inTrans[m.ID] {
				return storage.E(storage.OpMigrateSettle, storage.Conflict, "the batch is not the one in transit")
			}
		}
		if mv.moved == nil {
			mv.moved = map[string]bool{}
		}
		for id := range mv.inTrans {
			mv.moved[id] = true
		}
		mv.transit, mv.inTrans = nil, nil
		return nil
	})
}

func (s migrationStore) Finish(_ context.Context, ref storage.QueueRef, ttl time.Duration) error {
	q := s.d.lock(ref, false)
	mv := s.d.moveOf(ref)
	refuse := ""
	if mv == nil {
		refuse = "the queue is not sealed"
	} else {
		s.d.mvMu.Lock()
		switch {
		case mv.target == "":
			refuse = "the queue is not sealed"
		case !mv.tombUntil.IsZero():
		case mv.transit != nil:
			refuse = "a batch is in transit"
		case q != nil && len(q.msgs) > 0:
			refuse = "messages are left to move"
		default:
			mv.tombUntil = s.d.clock.Now().Add(ttl)
			mv.moved, mv.sealed = nil, storage.Sealed{}
		}
		s.d.mvMu.Unlock()
	}
	if q != nil {
		q.mu.Unlock()
	}
	if refuse != "" {
		return storage.E(storage.OpMigrateFinish, storage.Conflict, refuse)
	}
	s.d.drop(ref)
	s.d.notif.purge(ref)
	return nil
}
