package storagetest

import (
	"errors"
	"math/rand"
	"sync"
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

// takeRaceRounds is how many queues testClaimsRaceTake moves.
const takeRaceRounds = 24

// testClaimsRaceTake: a claim or pop racing the Take that puts every
// message of the queue in transit. Nothing settles during the race, so each
// message is free on the source or in transit: the claim either takes some
// or answers Moving. An empty answer sends the pooled driver on to the
// target, whose messages (newer, or moved before) it would hand out ahead
// of the batch, out of order. A driver that checks for a batch in transit,
// then looks for free messages in a second step, answers empty when the
// Take lands between the two.
func testClaimsRaceTake(m *menv) {
	m.eachQueue("claimrace", takeRaceRounds, func(rng *rand.Rand) {
		n := 1 + rng.Intn(4)
		m.src.post(m.q, "c", n, time.Hour)
		m.seal()
		pop := rng.Intn(2) == 0
		start := make(chan struct{})
		var (
			b    storage.Batch
			terr error
			wg   sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			b, terr = m.from.Take(m.ctx, m.q, n)
		}()
		var got []storage.Message
		var err error
		close(start)
		if pop {
			got, err = m.src.d.Messages().Pop(m.ctx, m.q, n)
		} else {
			var c storage.Claim
			c, err = m.src.d.Claims().Create(m.ctx, m.q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: n})
			got = c.Messages
		}
		wg.Wait()
		m.must("take", terr)
		what := map[bool]string{true: "pop", false: "claim"}[pop]
		switch {
		case errors.Is(err, storage.ErrMoving):
			m.wantMoving(what+" racing a take", err)
		case err != nil:
			m.t.Fatalf("%s racing a take: %v", what, err)
		case len(got) == 0:
			bids, _ := batchIDs(b)
			m.t.Fatalf("%s racing a take of %d messages answered none and no Moving, with %v in transit", what, n, bids)
		}
		m.must("import", m.to.Import(m.ctx, m.q, b))
		m.must("settle", m.from.Settle(m.ctx, m.q, b))
	})
}

// testListsRaceMove: listings of the source and of the target racing a
// mover that takes, imports and settles small batches. Take moves the
// newest, so the messages that left the source are always the queue's
// tail; the pooled driver lists the source, then the target after the last
// message the source showed. That holds only if each side's listing is
// whole: the source's a prefix of the queue holding every message whose
// settling had not begun, the target's a suffix. A backend that settles or
// imports a batch in several steps must do so newest first.
func testListsRaceMove(m *menv) {
	const listRaceRounds = 12 // each round lists without pause: FerretDB takes a second or so
	m.eachQueue("listrace", listRaceRounds, func(rng *rand.Rand) {
		ids := m.src.post(m.q, "c", 4+rng.Intn(12), time.Hour)
		sizes := make([]int, len(ids)+1)
		for i := range sizes {
			sizes[i] = 1 + rng.Intn(3)
		}
		m.seal()
		var (
			mu      sync.Mutex
			settled = map[string]bool{}
			merr    error
			done    = make(chan struct{})
		)
		go func() {
			defer close(done)
			for _, size := range sizes {
				b, err := m.from.Take(m.ctx, m.q, size)
				if err != nil || b.Empty() {
					merr = err
					return
				}
				if err := m.to.Import(m.ctx, m.q, b); err != nil {
					merr = err
					return
				}
				// Marked before the call: a listing may stop seeing them
				// any time after it begins.
				mu.Lock()
				for _, msg := range b.Messages {
					settled[msg.ID] = true
				}
				mu.Unlock()
				if err := m.from.Settle(m.ctx, m.q, b); err != nil {
					merr = err
					return
				}
			}
		}()
		list := func(e *env) []string {
			page, _, err := e.d.Messages().List(m.ctx, m.q, storage.ListMessagesOptions{
				Limit: 100, Echo: true, IncludeClaimed: true, IncludeDelayed: true,
			})
			if err != nil {
				m.t.Fatalf("listing racing a move: %v", err)
			}
			return messageIDs(page)
		}
		for listing := 0; ; listing++ {
			select {
			case <-done:
				m.must("move", merr)
				return
			default:
			}
			if listing == 100000 {
				m.t.Fatal("the move did not end within 100000 listings")
			}
			src, dst := list(m.src), list(m.dst)
			if !equalStrings(src, ids[:len(src)]) {
				m.t.Fatalf("source listing %d racing a move is no prefix of the queue %v: %v", listing, ids, src)
			}
			if !equalStrings(dst, ids[len(ids)-len(dst):]) {
				m.t.Fatalf("target listing %d racing a move is no suffix of the queue %v: %v", listing, ids, dst)
			}
			mu.Lock()
			for i, id := range ids[len(src):] {
				if !settled[id] {
					mu.Unlock()
					m.t.Fatalf("source listing %d racing a move misses message %d of %d, not settled: %v", listing, len(src)+i, len(ids), src)
				}
			}
			mu.Unlock()
		}
	})
}
