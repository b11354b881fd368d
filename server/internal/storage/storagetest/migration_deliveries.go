package storagetest

import (
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// testDeliveriesMove: the source passes its pending deliveries, in pages,
// with their bodies, attempts and due times, without changing them; the
// target records those of its live subscriptions once, due as they were;
// a finished source passes none.
func testDeliveriesMove(m *menv) {
	q := m.q
	subs, left := m.deliverySubscriptions()
	ids := m.src.post(q, "c", 3, time.Hour)
	leased := m.src.lease(time.Minute)
	if len(leased) != 9 {
		m.t.Fatalf("leased %d deliveries on the source, want 9", len(leased))
	}
	// Every delivery but the one in flight goes back, each in its own way.
	inFlight, retried, acked := leased[0], leased[1], leased[2]
	m.must("retry", m.src.d.Deliveries().Retry(m.ctx, retried, m.clock.Now().Add(10*time.Second), "refused"))
	m.must("ack", m.src.d.Deliveries().Ack(m.ctx, acked))
	for _, dl := range leased[3:] {
		m.must("release", m.src.d.Deliveries().Release(m.ctx, dl, m.clock.Now()))
	}
	due := map[string]time.Time{inFlight.ID(): m.clock.Now().Add(time.Minute), retried.ID(): m.clock.Now().Add(10 * time.Second)}
	for _, dl := range leased[3:] {
		due[dl.ID()] = m.clock.Now()
	}

	m.moveWithSubscriptions(subs)
	var passed []storage.MovedDelivery
	m.must("deliveries", m.from.Deliveries(m.ctx, q, 3, func(ds []storage.MovedDelivery) error {
		if len(ds) == 0 || len(ds) > 3 {
			return fmt.Errorf("a page of %d deliveries, want 1 to 3", len(ds))
		}
		passed = append(passed, ds...)
		return nil
	}))
	if len(passed) != len(due) {
		m.t.Fatalf("source passed %d deliveries, want the %d pending", len(passed), len(due))
	}
	body := map[string]string{}
	for _, dl := range leased {
		body[dl.MessageID] = string(dl.Body)
	}
	for _, dl := range passed {
		want, ok := due[dl.ID()]
		attempts := 0
		if dl.ID() == retried.ID() {
			attempts = 1
		}
		if !ok || !dl.Due.Equal(want) || dl.Attempts != attempts || string(dl.Body) != body[dl.MessageID] ||
			dl.TTL != time.Hour || !dl.Expires.Equal(dl.Posted.Add(time.Hour)) {
			m.t.Errorf("passed %s: due %v, attempts %d, body %s, ttl %v, posted %v, expires %v; want due %v (pending %v), attempts %d, body %s",
				dl.ID(), dl.Due, dl.Attempts, dl.Body, dl.TTL, dl.Posted, dl.Expires, want, ok, attempts, body[dl.MessageID])
		}
		delete(due, dl.ID())
	}
	if st := m.src.deliveryStats(q); st.Pending != 8 {
		m.t.Errorf("passing the deliveries changed the source: %d pending, want 8", st.Pending)
	}

	m.must("import deliveries", m.to.ImportDeliveries(m.ctx, q, passed))
	m.must("import deliveries again", m.to.ImportDeliveries(m.ctx, q, passed))
	expected := func(at time.Time) map[string]bool {
		out := map[string]bool{}
		for _, dl := range passed {
			if dl.SubscriptionID != left && !dl.Due.After(at) {
				out[dl.ID()] = true
			}
		}
		return out
	}
	seen := map[string]bool{}
	for _, step := range []time.Duration{0, 10 * time.Second, 50 * time.Second} {
		m.clock.Advance(step)
		want := expected(m.clock.Now())
		for _, dl := range m.dst.lease(time.Hour) {
			if !want[dl.ID()] || seen[dl.ID()] {
				m.t.Errorf("target leased %s at +%v, not due or leased before", dl.ID(), step)
			}
			if dl.ID() == retried.ID() && dl.Attempts != 1 {
				m.t.Errorf("retried delivery on the target: %d attempts, want 1", dl.Attempts)
			}
			seen[dl.ID()] = true
		}
		for id := range want {
			if !seen[id] {
				m.t.Errorf("target did not lease %s by +%v", id, step)
			}
		}
	}
	if st := m.dst.deliveryStats(q); st.Pending != int64(len(seen)) {
		m.t.Errorf("target pending %d after importing twice, want %d", st.Pending, len(seen))
	}
	for _, dl := range passed {
		if dl.MessageID != ids[0] && dl.MessageID != ids[1] && dl.MessageID != ids[2] {
			m.t.Errorf("passed a delivery of message %s, not posted", dl.MessageID)
		}
	}

	m.must("finish", m.from.Finish(m.ctx, q, tombstoneTTL))
	err := m.from.Deliveries(m.ctx, q, 3, func(ds []storage.MovedDelivery) error {
		return fmt.Errorf("a finished source passed %d deliveries", len(ds))
	})
	if err != nil {
		if _, moved := storage.MovedTo(err); !moved {
			m.t.Errorf("deliveries on a finished source: %v", err)
		}
	}
}

// testDeliveryCountsMove: the target adds the source's counts of
// notifications sent and given up to its own, for the queue and for each
// subscription live on it, keeps the later last error, and adds once per
// token.
func testDeliveryCountsMove(m *menv) {
	q := m.q
	dl := m.src.d.Deliveries()
	subs, left := m.deliverySubscriptions()
	a, b := subs[0].ID, subs[1].ID
	m.src.post(q, "c", 2, time.Hour)
	bySub := map[string][]storage.Delivery{}
	for _, d := range m.src.lease(time.Minute) {
		bySub[d.SubscriptionID] = append(bySub[d.SubscriptionID], d)
	}
	if len(bySub[a]) != 2 || len(bySub[b]) != 2 || len(bySub[left]) != 2 {
		m.t.Fatalf("leased %d, %d and %d deliveries on the source, want 2 each", len(bySub[a]), len(bySub[b]), len(bySub[left]))
	}
	// On the source: a sent twice, left failed once (an error first), b
	// given up once (the queue's last error).
	m.must("ack", dl.Ack(m.ctx, bySub[a][0]))
	m.must("ack", dl.Ack(m.ctx, bySub[a][1]))
	m.must("retry", dl.Retry(m.ctx, bySub[left][0], m.clock.Now().Add(time.Minute), "refused"))
	m.clock.Advance(time.Second)
	m.must("fail", dl.Fail(m.ctx, bySub[b][0], "gone"))
	gone := m.clock.Now()

	m.moveWithSubscriptions(subs)
	// On the target, its own: b sent once, then a failed once, later.
	m.dst.post(q, "c", 1, time.Hour)
	here := map[string]storage.Delivery{}
	for _, d := range m.dst.lease(time.Minute) {
		here[d.SubscriptionID] = d
	}
	m.must("ack on the target", m.dst.d.Deliveries().Ack(m.ctx, here[b]))
	m.clock.Advance(time.Second)
	m.must("retry on the target", m.dst.d.Deliveries().Retry(m.ctx, here[a], m.clock.Now().Add(time.Minute), "late"))
	late := m.clock.Now()

	st := m.src.deliveryStats(q)
	if st.Delivered != 2 || st.Failed != 1 || st.LastError != "gone" {
		m.t.Fatalf("source counts %d sent, %d given up, last error %q; want 2, 1, gone", st.Delivered, st.Failed, st.LastError)
	}
	for i := 0; i < 2; i++ {
		m.must("import delivery counts", m.to.ImportDeliveryCounts(m.ctx, q, st, "move-1"))
	}
	got := m.dst.deliveryStats(q)
	if got.Delivered != 3 || got.Failed != 1 || got.LastError != "late" || !got.LastErrorAt.Equal(late.Truncate(time.Millisecond)) {
		m.t.Errorf("target counts %d sent, %d given up, last error %q at %v; want 3, 1, late at %v",
			got.Delivered, got.Failed, got.LastError, got.LastErrorAt, late)
	}
	want := map[string]storage.SubscriptionDeliveries{
		a: {Delivered: 2, LastError: "late", LastErrorAt: late},
		b: {Delivered: 1, Failed: 1, LastError: "gone", LastErrorAt: gone},
	}
	if len(got.Subscriptions) != len(want) {
		m.t.Errorf("target has %d subscription rows, want %d", len(got.Subscriptions), len(want))
	}
	for _, row := range got.Subscriptions {
		w, ok := want[row.ID]
		if !ok || row.Delivered != w.Delivered || row.Failed != w.Failed || row.LastError != w.LastError ||
			!row.LastErrorAt.Equal(w.LastErrorAt.Truncate(time.Millisecond)) {
			m.t.Errorf("target subscription %s: %d sent, %d given up, last error %q at %v; want %+v (known %v)",
				row.ID, row.Delivered, row.Failed, row.LastError, row.LastErrorAt, w, ok)
		}
	}
}

// importRaceRounds is how many times testDeliveryCountsRaceErrors races an
// import against an error recorded on the target: enough for a store that
// reads the last error before it writes to lose one.
const importRaceRounds = 40

// testDeliveryCountsRaceErrors: an import of an earlier last error races a
// delivery failing on the target; whichever lands first, the target keeps
// its own, later error, for the queue and for the subscription.
func testDeliveryCountsRaceErrors(m *menv) {
	q := m.q
	subs, _ := m.deliverySubscriptions()
	a := subs[0].ID
	m.moveWithSubscriptions(subs)
	for round := range importRaceRounds {
		m.dst.post(q, "c", 1, time.Hour)
		var mine storage.Delivery
		for _, d := range m.dst.lease(time.Minute) {
			if d.SubscriptionID == a {
				mine = d
			}
		}
		if mine.SubscriptionID != a {
			m.t.Fatalf("round %d: no delivery of the new message to %s leased on the target", round, a)
		}
		// The source's error is later than any the target holds so far,
		// and earlier than the one the target records now.
		m.clock.Advance(5 * time.Millisecond)
		early := m.clock.Now()
		m.clock.Advance(5 * time.Millisecond)
		late := m.clock.Now()
		st := storage.DeliveryStats{LastError: "early", LastErrorAt: early, Subscriptions: []storage.SubscriptionDeliveries{
			{ID: a, LastError: "early", LastErrorAt: early},
		}}
		var wg sync.WaitGroup
		var imported, retried error
		wg.Go(func() { imported = m.to.ImportDeliveryCounts(m.ctx, q, st, fmt.Sprintf("race-%d", round)) })
		wg.Go(func() { retried = m.dst.d.Deliveries().Retry(m.ctx, mine, late.Add(time.Minute), "late") })
		wg.Wait()
		m.must("import delivery counts", imported)
		m.must("retry on the target", retried)
		got := m.dst.deliveryStats(q)
		row := storage.SubscriptionDeliveries{}
		for _, r := range got.Subscriptions {
			if r.ID == a {
				row = r
			}
		}
		at := late.Truncate(time.Millisecond)
		if got.LastError != "late" || !got.LastErrorAt.Equal(at) || row.LastError != "late" || !row.LastErrorAt.Equal(at) {
			m.t.Fatalf("round %d: the queue's last error %q at %v, the subscription's %q at %v; want late at %v for both",
				round, got.LastError, got.LastErrorAt, row.LastError, row.LastErrorAt, at)
		}
	}
}

// deliverySubscriptions subscribes two webhooks to the case's queue on
// the source, to be copied to the target, and a third that is not.
func (m *menv) deliverySubscriptions() (copied []storage.Subscription, left string) {
	for _, hook := range []string{"a", "b"} {
		id := m.src.subscribe(m.q, "http://127.0.0.1:9/"+hook, time.Hour, false)
		sub, err := m.src.d.Subscriptions().Get(m.ctx, m.q, id)
		m.must("get subscription", err)
		copied = append(copied, sub)
	}
	return copied, m.src.subscribe(m.q, "http://127.0.0.1:9/left", time.Hour, false)
}

// moveWithSubscriptions seals the queue, copies subs to the target as the
// mover does, and moves every message.
func (m *menv) moveWithSubscriptions(subs []storage.Subscription) {
	m.seal()
	for _, sub := range subs {
		sub.TTL = time.Hour
		_, _, err := m.dst.d.Subscriptions().Create(m.ctx, m.q, sub)
		m.must("copy subscription", err)
	}
	m.moveAll(2)
}
