package storagetest

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

var deliveryCases = []testCase{
	{"Deliveries/RecordedWithPost", testDeliveriesRecorded},
	{"Deliveries/Leases", testDeliveryLeases},
	{"Deliveries/RetryAndFail", testDeliveryRetryFail},
	{"Deliveries/Expiry", testDeliveryExpiry},
	{"Deliveries/Confirmation", testDeliveryConfirmation},
	{"Deliveries/RenewedSubscription", testDeliveryRenewedSubscription},
	{"Deliveries/SubscriptionGone", testDeliverySubscriptionGone},
	{"Deliveries/NextDue", testDeliveryNextDue},
	{"Deliveries/ConcurrentSettles", testConcurrentSettles},
}

// lease leases every due delivery of the case's projects. The backend may
// be shared with other runs, so deliveries of other projects are ignored
// (they stay leased only for hold).
func (e *env) lease(hold time.Duration) []storage.Delivery {
	e.t.Helper()
	out, _ := e.leaseNext(hold)
	return out
}

// leaseNext is lease, and also returns when the lease said the earliest
// pending delivery falls due.
func (e *env) leaseNext(hold time.Duration) ([]storage.Delivery, time.Time) {
	e.t.Helper()
	got, next, err := e.d.Deliveries().Lease(e.ctx, 1000, hold)
	if err != nil {
		e.t.Fatalf("lease: %v", err)
	}
	var out []storage.Delivery
	for _, d := range got {
		for _, u := range e.used {
			if d.Queue == u {
				out = append(out, d)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, next
}

func (e *env) deliveryStats(q storage.QueueRef) storage.DeliveryStats {
	e.t.Helper()
	st, err := e.d.Deliveries().Stats(e.ctx, q)
	if err != nil {
		e.t.Fatalf("delivery stats %v: %v", q, err)
	}
	return st
}

func testDeliveriesRecorded(e *env) {
	q, quiet := e.queue("notified"), e.queue("quiet")
	s1 := e.subscribe(q, "http://127.0.0.1:9/1", time.Hour, false)
	s2 := e.subscribe(q, "mailto:a@example.com", time.Hour, false)
	ids := e.post(q, "c", 3, 5*time.Minute)
	e.post(quiet, "c", 2, time.Hour)
	st := e.deliveryStats(q)
	if st.Pending != 6 || len(st.Subscriptions) != 2 {
		e.t.Fatalf("stats after posting 3 to 2 subscriptions: %+v", st)
	}
	for _, row := range st.Subscriptions {
		if row.Pending != 3 {
			e.t.Errorf("subscription %s pending %d, want 3", row.ID, row.Pending)
		}
	}
	if st := e.deliveryStats(quiet); st.Pending != 0 || len(st.Subscriptions) != 0 {
		e.t.Errorf("queue without subscriptions has deliveries: %+v", st)
	}
	got := e.lease(time.Minute)
	if len(got) != 6 {
		e.t.Fatalf("leased %d deliveries, want 6", len(got))
	}
	want := map[string]bool{}
	for i, id := range ids {
		for _, s := range []string{s1, s2} {
			want[id+"."+s] = true
			_ = i
		}
	}
	for _, d := range got {
		if !want[d.ID()] {
			e.t.Errorf("unexpected delivery %s", d.ID())
		}
		delete(want, d.ID())
		var n int
		if err := json.Unmarshal(d.Body, &n); err != nil || d.TTL != 5*time.Minute || d.Queue != q || d.Attempts != 0 || d.Lease == "" {
			e.t.Errorf("delivery %+v", d)
		}
		if !d.Expires.Equal(e.clock.Now().Add(5 * time.Minute)) {
			e.t.Errorf("delivery expires %v, want message expiry", d.Expires)
		}
	}
	// Deliveries outlive the message being consumed.
	if err := e.d.Messages().DeleteMany(e.ctx, q, ids, ""); err != nil {
		e.t.Fatal(err)
	}
	if st := e.deliveryStats(q); st.Pending != 6 {
		e.t.Errorf("pending %d after deleting the messages, want 6", st.Pending)
	}
	for _, d := range got {
		if err := e.d.Deliveries().Ack(e.ctx, d); err != nil {
			e.t.Fatal(err)
		}
	}
	st = e.deliveryStats(q)
	if st.Pending != 0 || st.Delivered != 6 || st.Failed != 0 {
		e.t.Errorf("stats after acking all: %+v", st)
	}
	for _, row := range st.Subscriptions {
		if row.Delivered != 3 || row.Pending != 0 {
			e.t.Errorf("subscription row %+v", row)
		}
	}
	if more := e.lease(time.Minute); len(more) != 0 {
		e.t.Errorf("acked deliveries leased again: %d", len(more))
	}
}

func testDeliveryLeases(e *env) {
	q := e.queue("leases")
	e.subscribe(q, "http://127.0.0.1:9/l", time.Hour, false)
	e.post(q, "c", 2, time.Hour)
	first := e.lease(30 * time.Second)
	if len(first) != 2 {
		e.t.Fatalf("leased %d, want 2", len(first))
	}
	if again := e.lease(30 * time.Second); len(again) != 0 {
		e.t.Errorf("held deliveries leased twice: %d", len(again))
	}
	e.clock.Advance(31 * time.Second)
	second := e.lease(30 * time.Second)
	if len(second) != 2 {
		e.t.Fatalf("lapsed leases: leased %d, want 2", len(second))
	}
	if second[0].Lease == first[0].Lease {
		e.t.Errorf("a new lease reused the old token")
	}
	// Release hands one back without an attempt: due at the given time.
	if err := e.d.Deliveries().Release(e.ctx, second[1], e.clock.Now().Add(5*time.Second)); err != nil {
		e.t.Fatal(err)
	}
	if early := e.lease(30 * time.Second); len(early) != 0 {
		e.t.Errorf("released delivery due before its time")
	}
	e.clock.Advance(5 * time.Second)
	back := e.lease(30 * time.Second)
	if len(back) != 1 || back[0].ID() != second[1].ID() || back[0].Attempts != 0 {
		e.t.Fatalf("after release: %+v", back)
	}
	if st := e.deliveryStats(q); st.LastError != "" || st.Pending != 2 {
		e.t.Errorf("release changed the stats: %+v", st)
	}
	second[1] = back[0]
	// The stale holder's retry is ignored; its ack still removes the delivery
	// (it was sent).
	if err := e.d.Deliveries().Retry(e.ctx, first[0], e.clock.Now(), "stale"); err != nil {
		e.t.Fatal(err)
	}
	if again := e.lease(30 * time.Second); len(again) != 0 {
		e.t.Errorf("stale retry released a held delivery")
	}
	if st := e.deliveryStats(q); st.LastError != "" {
		e.t.Errorf("stale retry recorded its error: %+v", st)
	}
	for _, d := range second {
		if err := e.d.Deliveries().Ack(e.ctx, d); err != nil {
			e.t.Fatal(err)
		}
	}
	if st := e.deliveryStats(q); st.Pending != 0 || st.Delivered != 2 {
		e.t.Errorf("after ack: %+v", st)
	}
}

func testDeliveryRetryFail(e *env) {
	q := e.queue("retry")
	e.subscribe(q, "http://127.0.0.1:9/r", time.Hour, false)
	e.post(q, "c", 2, time.Hour)
	got := e.lease(time.Minute)
	if len(got) != 2 {
		e.t.Fatalf("leased %d, want 2", len(got))
	}
	if err := e.d.Deliveries().Retry(e.ctx, got[0], e.clock.Now().Add(10*time.Second), "503 from subscriber"); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.Deliveries().Fail(e.ctx, got[1], "gave up"); err != nil {
		e.t.Fatal(err)
	}
	st := e.deliveryStats(q)
	if st.Pending != 1 || st.Failed != 1 || st.LastError != "gave up" || st.LastErrorAt.IsZero() {
		e.t.Errorf("stats: %+v", st)
	}
	if len(st.Subscriptions) != 1 || st.Subscriptions[0].Failed != 1 || st.Subscriptions[0].Pending != 1 || st.Subscriptions[0].LastError != "gave up" {
		e.t.Errorf("subscription rows: %+v", st.Subscriptions)
	}
	if early := e.lease(time.Minute); len(early) != 0 {
		e.t.Errorf("retried delivery due before its time")
	}
	e.clock.Advance(10 * time.Second)
	again := e.lease(time.Minute)
	if len(again) != 1 || again[0].ID() != got[0].ID() || again[0].Attempts != 1 {
		e.t.Fatalf("re-leased %+v, want %s with 1 attempt", again, got[0].ID())
	}
	if err := e.d.Deliveries().Ack(e.ctx, again[0]); err != nil {
		e.t.Fatal(err)
	}
	if st := e.deliveryStats(q); st.Pending != 0 || st.Delivered != 1 || st.Failed != 1 {
		e.t.Errorf("final stats: %+v", st)
	}
}

func testDeliveryExpiry(e *env) {
	q := e.queue("expiry")
	e.subscribe(q, "http://127.0.0.1:9/x", time.Hour, false)
	e.post(q, "c", 3, time.Minute)
	if n, err := e.d.Deliveries().Pending(e.ctx); err != nil || n < 3 {
		e.t.Errorf("backend pending %d (%v), want at least 3", n, err)
	}
	e.clock.Advance(time.Minute)
	// Pending is exact even before anything noticed the expiry.
	if st := e.deliveryStats(q); st.Pending != 0 {
		e.t.Errorf("expired deliveries pending: %+v", st)
	}
	if got := e.lease(time.Minute); len(got) != 0 {
		e.t.Errorf("expired deliveries leased: %d", len(got))
	}
	if st := e.deliveryStats(q); st.Failed != 3 {
		e.t.Errorf("expired deliveries not counted failed: %+v", st)
	}
}

func testDeliveryConfirmation(e *env) {
	q := e.queue("confirm")
	id := e.subscribe(q, "http://127.0.0.1:9/c", time.Hour, true)
	e.post(q, "c", 2, time.Hour)
	if got := e.lease(time.Minute); len(got) != 0 {
		e.t.Errorf("unconfirmed subscription got %d deliveries", len(got))
	}
	if err := e.d.Subscriptions().Confirm(e.ctx, q, id, true); err != nil {
		e.t.Fatal(err)
	}
	e.post(q, "c", 1, time.Hour)
	if got := e.lease(time.Minute); len(got) != 1 {
		e.t.Errorf("confirmed subscription got %d deliveries, want 1", len(got))
	}
	if err := e.d.Subscriptions().Confirm(e.ctx, q, id, false); err != nil {
		e.t.Fatal(err)
	}
	e.post(q, "c", 1, time.Hour)
	e.clock.Advance(2 * time.Minute)
	if got := e.lease(time.Minute); len(got) != 1 {
		e.t.Errorf("after unconfirming: %d deliveries, want only the earlier one", len(got))
	}
}

// testDeliveryRenewedSubscription: a subscription whose ttl an update
// extended is notified of posts made after its first ttl would have ended,
// whether or not the queue existed before it; one that lapsed is not.
func testDeliveryRenewedSubscription(e *env) {
	q, fresh := e.queue("renewed"), e.queue("renewed-fresh")
	e.post(q, "c", 1, time.Hour)
	ttl := time.Hour
	for _, queue := range []storage.QueueRef{q, fresh} {
		id := e.subscribe(queue, "http://127.0.0.1:9/r", time.Minute, false)
		if err := e.d.Subscriptions().Update(e.ctx, queue, id, storage.SubscriptionUpdate{TTL: &ttl}); err != nil {
			e.t.Fatal(err)
		}
	}
	lapsing := e.subscribe(e.queue("lapsing"), "http://127.0.0.1:9/l", time.Minute, false)
	e.clock.Advance(2 * time.Minute)
	e.post(q, "c", 2, time.Hour)
	e.post(fresh, "c", 1, time.Hour)
	e.post(e.queue("lapsing"), "c", 1, time.Hour)
	got := e.lease(time.Minute)
	if len(got) != 3 {
		e.t.Fatalf("renewed subscriptions got %d deliveries, want 3", len(got))
	}
	for _, d := range got {
		if d.SubscriptionID == lapsing {
			e.t.Errorf("a lapsed subscription got a delivery")
		}
	}
}

func testDeliverySubscriptionGone(e *env) {
	q := e.queue("subgone")
	keep := e.subscribe(q, "http://127.0.0.1:9/keep", time.Hour, false)
	gone := e.subscribe(q, "http://127.0.0.1:9/gone", time.Hour, false)
	short := e.subscribe(q, "http://127.0.0.1:9/short", time.Minute, false)
	e.post(q, "c", 2, time.Hour)
	if err := e.d.Subscriptions().Delete(e.ctx, q, gone); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	st := e.deliveryStats(q)
	if st.Pending != 2 || len(st.Subscriptions) != 1 || st.Subscriptions[0].ID != keep {
		e.t.Errorf("stats after delete and expiry: %+v", st)
	}
	got := e.lease(time.Minute)
	if len(got) != 2 {
		e.t.Fatalf("leased %d, want 2", len(got))
	}
	for _, d := range got {
		if d.SubscriptionID != keep {
			e.t.Errorf("delivery for subscription %s (deleted %s, expired %s)", d.SubscriptionID, gone, short)
		}
	}
}

// testDeliveryNextDue: a lease reports when the earliest pending delivery
// falls due (a retry's time, a lease's end), so a sender can sleep until
// then. Another run sharing the backend can only make it earlier, never
// due already: the lease took everything that was due.
func testDeliveryNextDue(e *env) {
	q := e.queue("nextdue")
	e.subscribe(q, "http://127.0.0.1:9/n", time.Hour, false)
	e.post(q, "c", 3, time.Hour)
	now := e.clock.Now()
	within := func(what string, next, latest time.Time) {
		e.t.Helper()
		if next.IsZero() || !next.After(now) || next.After(latest) {
			e.t.Errorf("%s: next due %v, want after now (%v) and at most %v", what, next, now, latest)
		}
	}
	got, next := e.leaseNext(30 * time.Second)
	if len(got) != 3 {
		e.t.Fatalf("leased %d, want 3", len(got))
	}
	within("all leased for 30s", next, now.Add(30*time.Second))
	if err := e.d.Deliveries().Retry(e.ctx, got[0], now.Add(10*time.Second), "503"); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.Deliveries().Release(e.ctx, got[1], now.Add(20*time.Second)); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.Deliveries().Ack(e.ctx, got[2]); err != nil {
		e.t.Fatal(err)
	}
	early, next := e.leaseNext(30 * time.Second)
	if len(early) != 0 {
		e.t.Fatalf("leased %d before anything was due", len(early))
	}
	within("a retry due in 10s", next, now.Add(10*time.Second))
	// takeAt advances the clock by by, leases, expects exactly want, checks
	// what the lease says is due next against latest (from the new now)
	// and acks want.
	takeAt := func(by time.Duration, want storage.Delivery, what string, latest time.Duration) {
		e.t.Helper()
		e.clock.Advance(by)
		now = e.clock.Now()
		took, next := e.leaseNext(30 * time.Second)
		if len(took) != 1 || took[0].ID() != want.ID() {
			e.t.Fatalf("%s: leased %+v, want %s", what, took, want.ID())
		}
		within(what, next, now.Add(latest))
		if err := e.d.Deliveries().Ack(e.ctx, took[0]); err != nil {
			e.t.Fatal(err)
		}
	}
	takeAt(10*time.Second, got[0], "the retry taken, the release due in 10s more", 10*time.Second)
	takeAt(10*time.Second, got[1], "the release taken and leased for 30s", 30*time.Second)
}

// settleWorkers settle one queue's deliveries at once in
// testConcurrentSettles: enough for a store that reads its counters
// before it writes them to lose some.
const settleWorkers = 6

// testConcurrentSettles: deliveries of one queue acked, failed and retried
// at the same moment are each counted, for the queue and for their
// subscription; none is lost to another settling alongside.
func testConcurrentSettles(e *env) {
	q := e.queue("settles")
	subs := []string{
		e.subscribe(q, "http://127.0.0.1:9/s1", time.Hour, false),
		e.subscribe(q, "http://127.0.0.1:9/s2", time.Hour, false),
	}
	const posts = 30
	e.post(q, "c", posts, time.Hour)
	got := e.lease(time.Minute)
	if len(got) != posts*len(subs) {
		e.t.Fatalf("leased %d deliveries, want %d", len(got), posts*len(subs))
	}
	// Every third is acked, every third failed, every third retried; the
	// worker i settles deliveries i, i+workers, ...
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for w := range settleWorkers {
		wg.Go(func() {
			for i := w; i < len(got); i += settleWorkers {
				switch i % 3 {
				case 0:
					errs[i] = e.d.Deliveries().Ack(e.ctx, got[i])
				case 1:
					errs[i] = e.d.Deliveries().Fail(e.ctx, got[i], fmt.Sprintf("gave up %d", i))
				default:
					errs[i] = e.d.Deliveries().Retry(e.ctx, got[i], e.clock.Now().Add(time.Hour), fmt.Sprintf("retry %d", i))
				}
			}
		})
	}
	wg.Wait()
	want := map[string]storage.SubscriptionDeliveries{}
	for i, d := range got {
		if errs[i] != nil {
			e.t.Fatalf("settling %s: %v", d.ID(), errs[i])
		}
		row := want[d.SubscriptionID]
		switch i % 3 {
		case 0:
			row.Delivered++
		case 1:
			row.Failed++
		default:
			row.Pending++
		}
		want[d.SubscriptionID] = row
	}
	st := e.deliveryStats(q)
	var delivered, failed, pending int64
	for _, w := range want {
		delivered, failed, pending = delivered+w.Delivered, failed+w.Failed, pending+w.Pending
	}
	if st.Delivered != delivered || st.Failed != failed || st.Pending != pending || st.LastError == "" {
		e.t.Errorf("queue counts delivered %d failed %d pending %d (last error %q); want %d, %d, %d and an error",
			st.Delivered, st.Failed, st.Pending, st.LastError, delivered, failed, pending)
	}
	for _, row := range st.Subscriptions {
		w := want[row.ID]
		if row.Delivered != w.Delivered || row.Failed != w.Failed || row.Pending != w.Pending || row.LastError == "" {
			e.t.Errorf("subscription %s: delivered %d failed %d pending %d (last error %q); want %d, %d, %d and an error",
				row.ID, row.Delivered, row.Failed, row.Pending, row.LastError, w.Delivered, w.Failed, w.Pending)
		}
	}
}
