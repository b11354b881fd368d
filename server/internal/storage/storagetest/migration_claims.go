package storagetest

import (
	"errors"
	"time"

	"sluice.dev/server/internal/storage"
)

// testClaimsBesideTransit: while a batch is in transit, what is left on the
// source sorts before it, so a claim or pop there may take the free
// messages left (oldest first, never one of the batch) or answer Moving;
// once none is free, both must answer Moving, since the caller would go on
// to the target's newer messages, past the batch. Once the batch settled,
// an empty source answers with nothing, not Moving.
func testClaimsBesideTransit(m *menv) {
	ms, cs := m.src.d.Messages(), m.src.d.Claims()
	ids := m.src.post(m.q, "c", 6, time.Hour)
	m.seal()
	b := m.take(2)
	if got, _ := batchIDs(b); !sameSet(got, ids[4:]) {
		m.t.Fatalf("take(2) = %v, want the newest %v", got, ids[4:])
	}

	free := ids[:4] // the free messages left on the source, oldest first
	popped, err := ms.Pop(m.ctx, m.q, 1)
	switch {
	case errors.Is(err, storage.ErrMoving):
		m.wantMoving("pop beside a batch in transit", err)
	case err != nil:
		m.t.Fatalf("pop beside a batch in transit: %v", err)
	case !equalStrings(messageIDs(popped), free[:1]):
		m.t.Fatalf("pop beside a batch in transit = %v, want the oldest %v", messageIDs(popped), free[:1])
	default:
		free = free[1:]
	}
	c, err := cs.Create(m.ctx, m.q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10})
	switch {
	case errors.Is(err, storage.ErrMoving):
		m.wantMoving("claim beside a batch in transit", err)
		// A driver that answers Moving to every claim meanwhile: claim
		// what is free once the batch settled, for the checks below.
		m.must("import", m.to.Import(m.ctx, m.q, b))
		m.must("settle", m.from.Settle(m.ctx, m.q, b))
		c = m.src.claim(m.q, 10, time.Minute, time.Minute)
		b = m.take(10)
	case err != nil:
		m.t.Fatalf("claim beside a batch in transit: %v", err)
	}
	if got := messageIDs(c.Messages); !equalStrings(got, free) {
		m.t.Fatalf("claim beside a batch in transit = %v, want every free one left %v", got, free)
	}

	// Nothing free here now, a batch in transit: Moving.
	_, err = cs.Create(m.ctx, m.q, storage.ClaimOptions{TTL: time.Minute, Limit: 1})
	m.wantMoving("claim with nothing free while a batch is in transit", err)
	_, err = ms.Pop(m.ctx, m.q, 1)
	m.wantMoving("pop with nothing free while a batch is in transit", err)
	m.sameBatch("the batch after the claims beside it", m.inTransit(), b)

	m.must("import", m.to.Import(m.ctx, m.q, b))
	m.must("settle", m.from.Settle(m.ctx, m.q, b))
	if c2, err := cs.Create(m.ctx, m.q, storage.ClaimOptions{TTL: time.Minute, Limit: 1}); err != nil || len(c2.Messages) != 0 {
		m.t.Errorf("claim with nothing free and nothing in transit = %v, %v; want no messages, no error", messageIDs(c2.Messages), err)
	}
}

// inTransit reads the batch in transit and fails on error.
func (m *menv) inTransit() storage.Batch {
	m.t.Helper()
	b, err := m.from.InTransit(m.ctx, m.q)
	m.must("in transit", err)
	return b
}
