package storagetest

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

// genRounds is how many random queues one run moves.
const genRounds = 8

// testGeneratedMoves moves random queues (free, claimed, delayed and
// near-expiry messages, claims about to lapse) in random batch sizes while
// time passes and clients delete, with random mover crashes. After every
// batch the queue as a client reads it (the source's messages, then the
// target's) must be exactly what it was before the batch, as time alone
// changes it: every attribute and the order preserved, nothing lost or
// doubled. The seed is logged, to replay a failure.
func testGeneratedMoves(m *menv) {
	m.eachQueue("gen", genRounds, func(rng *rand.Rand) {
		populate(m, rng)
		m.seal()
		moveRandomly(m, rng)
		checkTarget(m)
	})
}

// eachQueue runs round n times, each on a new queue (prefix and its
// number) on both backends, with one logged seed for the whole run, to
// replay a failure.
func (m *menv) eachQueue(prefix string, n int, round func(rng *rand.Rand)) {
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("STORAGETEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	m.t.Logf("seed %d (STORAGETEST_SEED replays it)", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < n; i++ {
		m.q = m.src.queue(fmt.Sprintf("%s%d", prefix, i))
		m.dst.queue(m.q.Name)
		round(rng)
	}
}

// populate posts and claims a random mix on the source.
func populate(m *menv, rng *rand.Rand) {
	ms := m.src.d.Messages()
	n := rng.Intn(25)
	for i := 0; i < n; i++ {
		m.clock.Advance(time.Duration(rng.Intn(300)) * time.Millisecond)
		nm := storage.NewMessage{TTL: time.Minute + time.Duration(rng.Intn(3600))*time.Second, Body: []byte(fmt.Sprint(i))}
		if rng.Intn(6) == 0 {
			nm.TTL = time.Second + time.Duration(rng.Intn(3000))*time.Millisecond // near expiry
		}
		if rng.Intn(5) == 0 {
			nm.Delay = time.Second + time.Duration(rng.Intn(20000))*time.Millisecond
		}
		if _, err := ms.Post(m.ctx, m.q, fmt.Sprint("client-", rng.Intn(2)), []storage.NewMessage{nm}); err != nil {
			m.t.Fatalf("post: %v", err)
		}
		if rng.Intn(5) == 0 {
			ttl := time.Minute + time.Duration(rng.Intn(300))*time.Second
			if rng.Intn(3) == 0 {
				ttl = time.Second + time.Duration(rng.Intn(2000))*time.Millisecond // about to lapse
			}
			m.src.claim(m.q, 1+rng.Intn(4), ttl, time.Duration(rng.Intn(60))*time.Second)
		}
	}
}

// moveRandomly runs the mover in random batch sizes, with time passing,
// client deletes between batches and mover crashes inside them. A source
// that settles and takes in one call (storage.SettleTaker) does so at
// random instead of the two calls.
func moveRandomly(m *menv, rng *rand.Rand) {
	prev := m.view()
	st, combined := m.from.(storage.SettleTaker)
	var pending *storage.Batch // taken by the last SettleAndTake
	for i := 0; ; i++ {
		if i > 1000 {
			m.t.Fatal("move did not end after 1000 batches")
		}
		if pending == nil && rng.Intn(3) == 0 && len(prev) > 0 {
			j := rng.Intn(len(prev))
			deleteRouted(m, prev[j])
			prev = append(prev[:j:j], prev[j+1:]...)
		}
		var b storage.Batch
		if pending != nil {
			b, pending = *pending, nil
		} else {
			b = m.take(1 + rng.Intn(8))
		}
		if b.Empty() {
			break
		}
		_, err := m.src.d.Messages().Get(m.ctx, m.q, b.Messages[0].ID)
		m.wantMoving("get in transit", err)
		// Before its import the batch is only on the source, and its
		// listing shows it, after what is left, in pages of any size.
		m.sameMessages(fmt.Sprintf("batch %d in transit", i), m.pagedView(rng), alive(prev, m.clock.Now()))
		m.sameCounts(fmt.Sprintf("batch %d in transit", i), alive(prev, m.clock.Now()))
		m.must("import", m.to.Import(m.ctx, m.q, b))
		if rng.Intn(4) == 0 {
			// The mover crashed after importing; the next one resumes.
			again, err := m.from.InTransit(m.ctx, m.q)
			m.must("in transit", err)
			m.sameBatch("in transit after a crash", again, b)
			m.must("import again", m.to.Import(m.ctx, m.q, again))
		}
		if combined && rng.Intn(2) == 0 {
			next, err := st.SettleAndTake(m.ctx, m.q, b, 1+rng.Intn(8))
			m.must("settle and take", err)
			again, err := m.from.InTransit(m.ctx, m.q)
			m.must("in transit", err)
			m.sameBatch("in transit after settle and take", again, next)
			_, err = m.src.d.Messages().Get(m.ctx, m.q, b.Messages[0].ID)
			m.wantMoved("get of a message settled by settle and take", err)
			taken, _ := batchIDs(next)
			for _, id := range taken {
				if id == b.Messages[0].ID {
					m.t.Fatalf("settle and take took the batch it settled again: %v", taken)
				}
			}
			// One batch is on the target, the next in transit on the
			// source: the view is whole.
			m.sameMessages(fmt.Sprintf("batch %d settled and the next taken", i), m.pagedView(rng), alive(prev, m.clock.Now()))
			pending = &next
			m.clock.Advance(time.Duration(rng.Intn(700)) * time.Millisecond)
			continue
		}
		m.must("settle", m.from.Settle(m.ctx, m.q, b))
		m.clock.Advance(time.Duration(rng.Intn(700)) * time.Millisecond)
		now := m.view()
		m.sameMessages(fmt.Sprintf("batch %d", i), now, alive(prev, m.clock.Now()))
		prev = now
	}
	if left := listAll(m.src, m.q); len(left) > 0 {
		m.t.Fatalf("source holds %v after the move", messageIDs(left))
	}
	m.must("finish", m.from.Finish(m.ctx, m.q, tombstoneTTL))
	m.sameMessages("after finish", listAll(m.dst, m.q), alive(prev, m.clock.Now()))
}

// deleteRouted deletes msg as the pooled driver does while a queue moves:
// on the source, and on the target when the source says it moved.
func deleteRouted(m *menv, msg storage.Message) {
	m.t.Helper()
	err := m.src.d.Messages().Delete(m.ctx, m.q, msg.ID, msg.ClaimID)
	if _, moved := storage.MovedTo(err); moved {
		err = m.dst.d.Messages().Delete(m.ctx, m.q, msg.ID, msg.ClaimID)
	}
	m.must("delete "+msg.ID, err)
}

// checkTarget checks that the moved queue works on the target: moved claims
// hold their messages, new posts sort after every moved message, and a new
// claim takes the free visible messages in their original order.
func checkTarget(m *menv) {
	m.t.Helper()
	moved := listAll(m.dst, m.q)
	claims := map[string][]string{}
	for _, msg := range moved {
		if msg.ClaimID != "" {
			claims[msg.ClaimID] = append(claims[msg.ClaimID], msg.ID)
		}
	}
	for id, want := range claims {
		c, err := m.dst.d.Claims().Get(m.ctx, m.q, id)
		m.must("moved claim get", err)
		if !sameSet(messageIDs(c.Messages), want) {
			m.t.Errorf("moved claim %s holds %v, want %v", id, messageIDs(c.Messages), want)
		}
	}
	posted := m.dst.post(m.q, "c", 2, time.Hour)
	all := listAll(m.dst, m.q)
	if got := messageIDs(all); len(got) != len(moved)+2 || !equalStrings(got[len(moved):], posted) {
		m.t.Fatalf("target after posting = %v, want %v then %v", got, messageIDs(moved), posted)
	}
	now := m.clock.Now()
	var want []string
	for _, msg := range all {
		if msg.ClaimID == "" && !msg.DelayUntil.After(now) {
			want = append(want, msg.ID)
		}
	}
	c := m.dst.claim(m.q, 100, time.Minute, 0)
	if got := messageIDs(c.Messages); !equalStrings(got, want) {
		m.t.Errorf("claim on target took %v, want %v in order", got, want)
	}
	m.must("done", m.to.Done(m.ctx, m.q))
}
