package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// testConcurrentMix runs RunMix on one queue of the driver.
func testConcurrentMix(e *env) {
	RunMix(e.t, MixOptions{Drivers: []storage.Driver{e.d}, Queue: e.queue("mixed"), Workers: 6, Ops: 40})
}

// MixOptions shape one RunMix.
type MixOptions struct {
	// Drivers: worker i calls Drivers[i % len] (replicas of one pooled
	// store, or one driver).
	Drivers []storage.Driver
	Queue   storage.QueueRef
	// Workers run Ops calls each, and then, while During runs, more (up
	// to 50 x Ops).
	Workers, Ops int
	// Preload messages are posted before the workers start.
	Preload int
	// During runs beside the workers (a queue move); nil: nothing.
	During func()
	// Retry is how often a call answered ErrMoving (503, nothing done)
	// is made again, as clients do; 0: never.
	Retry int
}

// RunMix runs workers that make random posts, claims (then delete with
// the claim, release, renew, or delete many with it), pops, deletes and
// bulk deletes without a claim, and reads, all at once on one queue, so a
// driver that batches concurrent calls (Redis' group commit) merges them
// in every combination, and a pooled one routes them through a move
// (During). No claim may lapse and no message expire meanwhile (a clock
// that stands still, or one that moves less than the hour the workers
// give both), so a claim ends only when released. Every call is stamped
// with a logical start and end, and the history must be one a queue could
// have produced:
//   - no message is taken twice (popped, or deleted with its claim);
//   - no claim or pop gets a message that a claim acquired earlier still
//     held (its release began only after this call ended);
//   - a delete with the claim that holds the message succeeds;
//   - a read never returns a message whose removal ended before it began;
//   - at the end the queue lists every posted message not yet removed,
//     once each, and nothing else.
//
// The seed is in the failure message; workers draw from their own stream.
func RunMix(t testing.TB, o MixOptions) {
	t.Helper()
	seed := rand.Uint64()
	ctx := context.Background()
	h := &mixHistory{acquired: map[string][]*mixClaim{}, taken: map[string][]mixTake{}, maybe: map[string]bool{}}
	pre := &mixWorker{ctx: ctx, d: o.Drivers[0], q: o.Queue, h: h, retries: o.Retry, rng: rand.New(rand.NewPCG(seed, 1<<32)), name: "preload"}
	for pre.n < o.Preload {
		if !pre.post() {
			break
		}
	}
	var during atomic.Bool
	during.Store(o.During != nil)
	var wg sync.WaitGroup
	for w := range o.Workers {
		wg.Go(func() {
			m := &mixWorker{ctx: ctx, d: o.Drivers[w%len(o.Drivers)], q: o.Queue, h: h, retries: o.Retry, rng: rand.New(rand.NewPCG(seed, uint64(w))), name: fmt.Sprint("worker-", w)}
			for i := 0; i < 50*o.Ops && (i < o.Ops || during.Load()); i++ {
				if !m.step() {
					return
				}
			}
		})
	}
	if o.During != nil {
		o.During()
		during.Store(false)
	}
	wg.Wait()
	for _, err := range h.errs {
		t.Errorf("seed %d: %s", seed, err)
	}
	if len(h.errs) > 0 {
		return
	}
	h.check(func(format string, args ...any) { t.Errorf("seed %d: "+format, append([]any{seed}, args...)...) })
	checkMixEnd(t, ctx, o.Drivers[0], o.Queue, h, seed)
}

// mixSpan is a call's logical start and end.
type mixSpan struct{ start, end int64 }

// mixClaim is one claim as the workers saw it: when it was acquired, and
// when its release began (0: never released).
type mixClaim struct {
	id      string
	span    mixSpan
	release int64
}

// mixHistory is what every worker saw, under mu.
type mixHistory struct {
	clock    atomic.Int64
	mu       sync.Mutex
	posted   []string
	acquired map[string][]*mixClaim // message id -> claims that got it
	taken    map[string][]mixTake   // message id -> pops and deletes with its claim that removed it
	maybe    map[string]bool        // deleted without a claim: removed unless it was held
	reads    []mixRead
	errs     []string
}

// mixTake is a call that removed a message: a pop (by nil) or a delete
// with the claim by.
type mixTake struct {
	span mixSpan
	by   *mixClaim
}

type mixRead struct {
	id   string
	span mixSpan
}

func (h *mixHistory) tick() int64 { return h.clock.Add(1) }

func (h *mixHistory) fail(format string, args ...any) {
	h.mu.Lock()
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *mixHistory) take(id string, s mixSpan, by *mixClaim) {
	h.taken[id] = append(h.taken[id], mixTake{s, by})
}

// check tests the history's invariants (see RunMix).
func (h *mixHistory) check(fail func(string, ...any)) {
	for id, ts := range h.taken {
		if len(ts) > 1 {
			fail("message %s taken %d times: %v", id, len(ts), ts)
		}
	}
	// heldAt reports a claim of id acquired before a call began that was
	// still held (not released before the call ended).
	heldAt := func(id string, s mixSpan, except *mixClaim) *mixClaim {
		for _, c := range h.acquired[id] {
			if c != except && c.span.end < s.start && (c.release == 0 || c.release > s.end) {
				return c
			}
		}
		return nil
	}
	for id, cs := range h.acquired {
		for _, c := range cs {
			if old := heldAt(id, c.span, c); old != nil {
				fail("claim %s %v got message %s, which claim %s (acquired %v, released at %d) still held", c.id, c.span, id, old.id, old.span, old.release)
			}
		}
	}
	for id, ts := range h.taken {
		for _, t := range ts {
			if c := heldAt(id, t.span, t.by); c != nil {
				fail("message %s taken at %v while claim %s (acquired %v, released at %d) held it", id, t.span, c.id, c.span, c.release)
			}
		}
	}
	for _, r := range h.reads {
		for _, t := range h.taken[r.id] {
			if t.span.end < r.span.start {
				fail("read %v returned message %s, removed at %v", r.span, r.id, t.span)
			}
		}
	}
}

// checkMixEnd compares the queue's final listing with the history.
func checkMixEnd(t testing.TB, ctx context.Context, d storage.Driver, q storage.QueueRef, h *mixHistory, seed uint64) {
	t.Helper()
	listed, err := listEvery(ctx, d, q)
	if err != nil {
		t.Fatalf("seed %d: list: %v", seed, err)
	}
	posted := map[string]bool{}
	for _, id := range h.posted {
		posted[id] = true
	}
	for id, n := range listed {
		switch {
		case n != 1:
			t.Errorf("seed %d: message %s listed %d times", seed, id, n)
		case len(h.taken[id]) > 0:
			t.Errorf("seed %d: message %s listed after it was removed at %v", seed, id, h.taken[id][0].span)
		case !posted[id]:
			t.Errorf("seed %d: message %s listed, never posted", seed, id)
		}
	}
	for _, id := range h.posted {
		if listed[id] == 0 && len(h.taken[id]) == 0 && !h.maybe[id] {
			t.Errorf("seed %d: message %s was posted, never removed, and is not listed (lost)", seed, id)
		}
	}
	if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != len(listed) {
		t.Errorf("seed %d: stats count %d messages (%v), the listing %d", seed, st.Total, err, len(listed))
	}
}

// mixWorker is one worker's view.
type mixWorker struct {
	ctx     context.Context
	d       storage.Driver
	q       storage.QueueRef
	h       *mixHistory
	retries int
	rng     *rand.Rand
	name    string
	n       int
}

// call makes a call again while it is answered ErrMoving, up to m.retries
// times, pausing a little as a client would.
func (m *mixWorker) call(f func() error) error {
	err := f()
	for try := 0; errors.Is(err, storage.ErrMoving) && try < m.retries; try++ {
		time.Sleep(time.Duration(1+m.rng.IntN(5)) * time.Millisecond)
		err = f()
	}
	return err
}

// step makes one random call and records it; false stops the worker (a
// call failed, recorded in the history).
func (m *mixWorker) step() bool {
	switch r := m.rng.IntN(100); {
	case r < 30:
		return m.post()
	case r < 55:
		return m.claim()
	case r < 70:
		return m.pop()
	case r < 80:
		return m.deleteFree()
	case r < 88:
		return m.deleteManyFree()
	default:
		return m.read()
	}
}

func (m *mixWorker) post() bool {
	msgs := make([]storage.NewMessage, 1+m.rng.IntN(3))
	for i := range msgs {
		m.n++
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%s-%d"`, m.name, m.n))}
	}
	var ids []string
	err := m.call(func() (err error) { ids, err = m.d.Messages().Post(m.ctx, m.q, m.name, msgs); return err })
	if err != nil || len(ids) != len(msgs) {
		m.h.fail("post %d: ids %v, %v", len(msgs), ids, err)
		return false
	}
	m.h.mu.Lock()
	m.h.posted = append(m.h.posted, ids...)
	m.h.mu.Unlock()
	return true
}

// known is a random posted id, or "" before any post.
func (m *mixWorker) known() string {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	if len(m.h.posted) == 0 {
		return ""
	}
	return m.h.posted[m.rng.IntN(len(m.h.posted))]
}

func (m *mixWorker) claim() bool {
	start := m.h.tick()
	var c storage.Claim
	opts := storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 1 + m.rng.IntN(4)}
	err := m.call(func() (err error) { c, err = m.d.Claims().Create(m.ctx, m.q, opts); return err })
	end := m.h.tick()
	if err != nil {
		m.h.fail("claim: %v", err)
		return false
	}
	if len(c.Messages) == 0 {
		return true
	}
	mc := &mixClaim{id: c.ID, span: mixSpan{start, end}}
	ids := messageIDs(c.Messages)
	m.h.mu.Lock()
	for _, id := range ids {
		m.h.acquired[id] = append(m.h.acquired[id], mc)
	}
	m.h.mu.Unlock()
	switch m.rng.IntN(5) {
	case 0: // delete each with the claim
		return m.deleteHeld(mc, ids)
	case 1: // delete some, release the rest
		k := m.rng.IntN(len(ids) + 1)
		return m.deleteHeld(mc, ids[:k]) && m.release(mc)
	case 2: // renew, then release
		if err := m.call(func() error { return m.d.Claims().Update(m.ctx, m.q, c.ID, 2*time.Hour, time.Minute) }); err != nil {
			m.h.fail("renew claim %s: %v", c.ID, err)
			return false
		}
		return m.release(mc)
	case 3: // delete them all at once with the claim
		return m.takeWith(mc, ids, func() error { return m.d.Messages().DeleteMany(m.ctx, m.q, ids, c.ID) }) && m.gone(ids)
	default: // keep it
		return true
	}
}

// deleteHeld deletes each message with the claim holding it: it must go.
func (m *mixWorker) deleteHeld(c *mixClaim, ids []string) bool {
	for _, id := range ids {
		if !m.takeWith(c, []string{id}, func() error { return m.d.Messages().Delete(m.ctx, m.q, id, c.id) }) {
			return false
		}
	}
	return m.gone(ids)
}

// takeWith makes a delete of ids with claim c, which holds them: it must
// succeed, and is recorded as taking them.
func (m *mixWorker) takeWith(c *mixClaim, ids []string, del func() error) bool {
	start := m.h.tick()
	err := m.call(del)
	end := m.h.tick()
	if err != nil {
		m.h.fail("delete %v with its claim %s: %v", ids, c.id, err)
		return false
	}
	m.h.mu.Lock()
	for _, id := range ids {
		m.h.take(id, mixSpan{start, end}, c)
	}
	m.h.mu.Unlock()
	return true
}

// gone checks that messages this worker removed read as absent.
func (m *mixWorker) gone(ids []string) bool {
	for _, id := range ids {
		if err := m.call(func() error { _, err := m.d.Messages().Get(m.ctx, m.q, id); return err }); !storage.Is(err, storage.NotFound) {
			m.h.fail("message %s read after its delete with its claim: %v", id, err)
			return false
		}
	}
	return true
}

func (m *mixWorker) release(c *mixClaim) bool {
	m.h.mu.Lock()
	c.release = m.h.tick()
	m.h.mu.Unlock()
	if err := m.call(func() error { return m.d.Claims().Delete(m.ctx, m.q, c.id) }); err != nil {
		m.h.fail("release claim %s: %v", c.id, err)
		return false
	}
	return true
}

func (m *mixWorker) pop() bool {
	start := m.h.tick()
	var msgs []storage.Message
	limit := 1 + m.rng.IntN(3)
	err := m.call(func() (err error) { msgs, err = m.d.Messages().Pop(m.ctx, m.q, limit); return err })
	end := m.h.tick()
	if err != nil {
		m.h.fail("pop: %v", err)
		return false
	}
	m.h.mu.Lock()
	for _, msg := range msgs {
		m.h.take(msg.ID, mixSpan{start, end}, nil)
	}
	m.h.mu.Unlock()
	return true
}

// deleteFree deletes a known message without a claim: it goes, or the
// answer is that a claim holds it.
func (m *mixWorker) deleteFree() bool {
	id := m.known()
	if id == "" {
		return true
	}
	err := m.call(func() error { return m.d.Messages().Delete(m.ctx, m.q, id, "") })
	if err != nil && !storage.Is(err, storage.Forbidden) {
		m.h.fail("delete %s without a claim: %v", id, err)
		return false
	}
	if err == nil {
		m.h.mu.Lock()
		m.h.maybe[id] = true
		m.h.mu.Unlock()
	}
	return true
}

// deleteManyFree deletes known messages without a claim: the free ones go.
func (m *mixWorker) deleteManyFree() bool {
	var ids []string
	for range 1 + m.rng.IntN(4) {
		if id := m.known(); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return true
	}
	if err := m.call(func() error { return m.d.Messages().DeleteMany(m.ctx, m.q, ids, "") }); err != nil {
		m.h.fail("delete many %v without a claim: %v", ids, err)
		return false
	}
	m.h.mu.Lock()
	for _, id := range ids {
		m.h.maybe[id] = true
	}
	m.h.mu.Unlock()
	return true
}

// read gets a known message, or a few at once.
func (m *mixWorker) read() bool {
	ids := []string{m.known(), m.known()}
	if ids[0] == "" {
		return true
	}
	start := m.h.tick()
	var got []storage.Message
	var err error
	if m.rng.IntN(2) == 0 {
		var msg storage.Message
		err = m.call(func() (err error) { msg, err = m.d.Messages().Get(m.ctx, m.q, ids[0]); return err })
		if storage.Is(err, storage.NotFound) {
			err = nil
		} else if err == nil {
			got = []storage.Message{msg}
		}
	} else {
		err = m.call(func() (err error) { got, err = m.d.Messages().GetMany(m.ctx, m.q, ids); return err })
	}
	end := m.h.tick()
	if err != nil {
		m.h.fail("read %v: %v", ids, err)
		return false
	}
	m.h.mu.Lock()
	for _, msg := range got {
		m.h.reads = append(m.h.reads, mixRead{msg.ID, mixSpan{start, end}})
	}
	m.h.mu.Unlock()
	return true
}
