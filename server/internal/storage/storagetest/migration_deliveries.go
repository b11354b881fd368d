package storagetest

import (
	"fmt"
	"time"

	"sluice.dev/server/internal/storage"
)

// testDeliveriesMove: the source passes its pending deliveries, in pages,
// with their bodies, attempts and due times, without changing them; the
// target records those of its live subscriptions once, due as they were;
// a finished source passes none.
func testDeliveriesMove(m *menv) {
	q := m.q
	var subs []storage.Subscription // copied to the target
	for _, hook := range []string{"a", "b"} {
		id := m.src.subscribe(q, "http://127.0.0.1:9/"+hook, time.Hour, false)
		sub, err := m.src.d.Subscriptions().Get(m.ctx, q, id)
		m.must("get subscription", err)
		subs = append(subs, sub)
	}
	left := m.src.subscribe(q, "http://127.0.0.1:9/left", time.Hour, false) // not on the target
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

	m.seal()
	for _, sub := range subs {
		sub.TTL = time.Hour
		_, _, err := m.dst.d.Subscriptions().Create(m.ctx, q, sub)
		m.must("copy subscription", err)
	}
	m.moveAll(2)
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
