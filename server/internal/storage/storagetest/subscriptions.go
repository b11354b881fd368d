package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

var subscriptionCases = []testCase{
	{"Subscriptions/CRUD", testSubscriptionCRUD},
	{"Subscriptions/Paging", testSubscriptionPaging},
	{"Subscriptions/TTL", testSubscriptionTTL},
	{"Subscriptions/Isolation", testSubscriptionIsolation},
	{"Subscriptions/QueueDelete", testSubscriptionQueueDelete},
	{"Subscriptions/GivenID", testSubscriptionGivenID},
	{"Subscriptions/ConcurrentWriters", testSubscriptionConcurrentWriters},
	{"Subscriptions/ConcurrentSameSubscriber", testSubscriptionConcurrentSameSubscriber},
	{"Subscriptions/RaceQueueDeletes", testSubscriptionsRaceQueueDeletes},
}

// subscriptionRaceRounds is how many subscriptions
// testSubscriptionConcurrentWriters changes three ways at once.
const subscriptionRaceRounds = 20

// testSubscriptionConcurrentWriters: an update of the options, one of the
// ttl and a confirmation of one subscription, at the same moment, all
// stick: none is undone by another writing the subscription alongside.
func testSubscriptionConcurrentWriters(e *env) {
	q := e.queue("subwriters")
	ss := e.d.Subscriptions()
	for round := range subscriptionRaceRounds {
		id := e.subscribe(q, fmt.Sprintf("http://127.0.0.1:9/w%d", round), time.Hour, true)
		ttl, opts := 2*time.Hour, storage.Metadata{"round": json.Number(fmt.Sprint(round))}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		wg.Go(func() { errs[0] = ss.Update(e.ctx, q, id, storage.SubscriptionUpdate{Options: opts}) })
		wg.Go(func() { errs[1] = ss.Update(e.ctx, q, id, storage.SubscriptionUpdate{TTL: &ttl}) })
		wg.Go(func() { errs[2] = ss.Confirm(e.ctx, q, id, true) })
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				e.t.Fatalf("round %d: %v", round, err)
			}
		}
		got, err := ss.Get(e.ctx, q, id)
		if err != nil {
			e.t.Fatalf("round %d: %v", round, err)
		}
		if !got.Confirmed || got.TTL != ttl || got.Options["round"] != opts["round"] || got.Options["k"] != nil {
			e.t.Fatalf("round %d: confirmed %v, ttl %v, options %v; want true, %v, %v", round, got.Confirmed, got.TTL, got.Options, ttl, opts)
		}
	}
}

// testSubscriptionConcurrentSameSubscriber: creates of one subscriber at
// the same moment make one subscription (Create is idempotent per
// subscriber, so every caller gets its id and one of them created), and
// updates of two subscriptions to one new subscriber at the same moment
// leave at most one of them with it, the other told Conflict.
func testSubscriptionConcurrentSameSubscriber(e *env) {
	q := e.queue("subsame")
	ss := e.d.Subscriptions()
	const rounds, writers = 10, 4
	for round := range rounds {
		subscriber := fmt.Sprintf("http://127.0.0.1:9/same%d", round)
		ids, created, errs := make([]string, writers), make([]bool, writers), make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				ids[w], created[w], errs[w] = ss.Create(e.ctx, q, storage.Subscription{Subscriber: subscriber, TTL: time.Hour, Options: storage.Metadata{}})
			})
		}
		wg.Wait()
		made := 0
		for w := range writers {
			if errs[w] != nil {
				e.t.Fatalf("round %d: create: %v", round, errs[w])
			}
			if ids[w] != ids[0] {
				e.t.Fatalf("round %d: one subscriber created as %v", round, ids)
			}
			if created[w] {
				made++
			}
		}
		if made != 1 {
			e.t.Fatalf("round %d: %d creates say they created %s, want 1", round, made, subscriber)
		}
		// Two subscriptions renamed to one new subscriber at once.
		a := e.subscribe(q, subscriber+"/a", time.Hour, false)
		b := e.subscribe(q, subscriber+"/b", time.Hour, false)
		target := subscriber + "/both"
		var ea, eb error
		wg.Go(func() { ea = ss.Update(e.ctx, q, a, storage.SubscriptionUpdate{Subscriber: &target}) })
		wg.Go(func() { eb = ss.Update(e.ctx, q, b, storage.SubscriptionUpdate{Subscriber: &target}) })
		wg.Wait()
		for _, err := range []error{ea, eb} {
			if err != nil && !storage.Is(err, storage.Conflict) {
				e.t.Fatalf("round %d: update: %v", round, err)
			}
		}
		holders := 0
		for _, id := range []string{a, b} {
			got, err := ss.Get(e.ctx, q, id)
			if err != nil {
				e.t.Fatal(err)
			}
			if got.Subscriber == target {
				holders++
			}
		}
		if holders != 1 || (ea == nil) == (eb == nil) {
			e.t.Fatalf("round %d: %d subscriptions hold %s after two updates at once (errors %v, %v), want 1 and one Conflict", round, holders, target, ea, eb)
		}
	}
}

// testSubscriptionGivenID: Create keeps an id and an expiry it is given (a
// move re-creates subscriptions as they were), refuses a malformed id and
// a past expiry, and a subscription so made pages in its id's place.
func testSubscriptionGivenID(e *env) {
	q := e.queue("given")
	ss := e.d.Subscriptions()
	before := e.subscribe(q, "http://127.0.0.1:9/before", time.Hour, false)
	given := storage.NewSubscriptionID()
	after := e.subscribe(q, "http://127.0.0.1:9/after", time.Hour, false)
	id, created, err := ss.Create(e.ctx, q, storage.Subscription{ID: given, Subscriber: "http://127.0.0.1:9/given",
		TTL: time.Hour, Options: storage.Metadata{}})
	if err != nil || !created || id != given {
		e.t.Fatalf("create with id %s: %s, created %v, %v", given, id, created, err)
	}
	if got, err := ss.Get(e.ctx, q, given); err != nil || got.ID != given || got.Subscriber != "http://127.0.0.1:9/given" {
		e.t.Fatalf("get %s: %+v, %v", given, got, err)
	}
	var listed []string
	for marker, page := "", 0; page < 5; page++ {
		subs, next, err := ss.List(e.ctx, q, storage.ListSubscriptionsOptions{Marker: marker, Limit: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range subs {
			listed = append(listed, s.ID)
		}
		if next == "" {
			break
		}
		marker = next
	}
	if want := fmt.Sprint([]string{before, given, after}); fmt.Sprint(listed) != want {
		e.t.Errorf("listed %v, want %s (by id)", listed, want)
	}
	// A given expiry is kept, with the TTL: the subscription's age goes on.
	// One that has passed is refused.
	e.clock.Advance(time.Minute)
	kept := storage.Subscription{ID: storage.NewSubscriptionID(), Subscriber: "http://127.0.0.1:9/kept",
		TTL: time.Hour, Expires: e.clock.Now().Add(20 * time.Minute), Options: storage.Metadata{}}
	if _, _, err := ss.Create(e.ctx, q, kept); err != nil {
		e.t.Fatal(err)
	}
	if got, err := ss.Get(e.ctx, q, kept.ID); err != nil || got.TTL != time.Hour || !got.Expires.Equal(kept.Expires) ||
		got.Age(e.clock.Now()) != 40*time.Minute {
		e.t.Errorf("created with an expiry: %+v, %v; want ttl 1h, expiry %v, age 40m", got, err, kept.Expires)
	}
	lapsed := storage.Subscription{Subscriber: "http://127.0.0.1:9/lapsed", TTL: time.Hour, Expires: e.clock.Now()}
	if _, _, err := ss.Create(e.ctx, q, lapsed); !storage.Is(err, storage.Invalid) {
		e.t.Errorf("created with an expiry that has passed: %v, want invalid", err)
	}
	// A malformed id is refused before anything is looked up, also for a
	// subscriber that is already subscribed.
	for _, bad := range []string{"xyz", "5c6939a8ef2f8e4a1c4a1a1a", given + "x"} {
		for _, to := range []string{"http://127.0.0.1:9/bad", "http://127.0.0.1:9/before"} {
			_, _, err := ss.Create(e.ctx, q, storage.Subscription{ID: bad, Subscriber: to, TTL: time.Hour})
			if !storage.Is(err, storage.Invalid) {
				e.t.Errorf("create for %s with id %q: %v, want invalid", to, bad, err)
			}
		}
	}
}

// subscribe creates a subscription and fails the test on error.
func (e *env) subscribe(q storage.QueueRef, subscriber string, ttl time.Duration, needsConfirm bool) string {
	e.t.Helper()
	id, created, err := e.d.Subscriptions().Create(e.ctx, q, storage.Subscription{
		Subscriber: subscriber, TTL: ttl, Options: storage.Metadata{"k": "v"}, NeedsConfirmation: needsConfirm,
	})
	if err != nil {
		e.t.Fatalf("subscribe %s to %v: %v", subscriber, q, err)
	}
	if !created {
		e.t.Fatalf("subscribe %s to %v: not created", subscriber, q)
	}
	return id
}

func testSubscriptionCRUD(e *env) {
	q := e.queue("subs")
	ss := e.d.Subscriptions()
	id := e.subscribe(q, "http://127.0.0.1:9/hook", time.Hour, false)
	e.clock.Advance(10 * time.Second)
	got, err := ss.Get(e.ctx, q, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if got.ID != id || got.Subscriber != "http://127.0.0.1:9/hook" || got.TTL != time.Hour ||
		got.Options["k"] != "v" || got.Confirmed || got.Age(e.clock.Now()) != 10*time.Second {
		e.t.Errorf("get: %+v (age %v)", got, got.Age(e.clock.Now()))
	}
	// Same subscriber again: same id, nothing changed.
	again, created, err := ss.Create(e.ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:9/hook", TTL: time.Minute, Options: storage.Metadata{}})
	if err != nil || created || again != id {
		e.t.Errorf("duplicate create: id %q created %v err %v; want %q false nil", again, created, err, id)
	}
	if got, _ := ss.Get(e.ctx, q, id); got.TTL != time.Hour || got.Options["k"] != "v" {
		e.t.Errorf("duplicate create changed the subscription: %+v", got)
	}
	// Update: ttl restarts the lifetime, options replace, subscriber moves.
	ttl, to := 2*time.Hour, "https://127.0.0.1:9/other"
	if err := ss.Update(e.ctx, q, id, storage.SubscriptionUpdate{TTL: &ttl, Options: storage.Metadata{"n": json.Number("1.50")}, Subscriber: &to}); err != nil {
		e.t.Fatal(err)
	}
	got, _ = ss.Get(e.ctx, q, id)
	if got.TTL != ttl || got.Age(e.clock.Now()) != 0 || got.Options["n"] != json.Number("1.50") || got.Options["k"] != nil || got.Subscriber != to {
		e.t.Errorf("after update: %+v", got)
	}
	other := e.subscribe(q, "mailto:ops@example.com", time.Hour, false)
	if err := ss.Update(e.ctx, q, other, storage.SubscriptionUpdate{Subscriber: &to}); !storage.Is(err, storage.Conflict) {
		e.t.Errorf("update to a taken subscriber: %v, want conflict", err)
	}
	if err := ss.Confirm(e.ctx, q, id, true); err != nil {
		e.t.Fatal(err)
	}
	if got, _ := ss.Get(e.ctx, q, id); !got.Confirmed {
		e.t.Errorf("confirm did not stick: %+v", got)
	}
	// Unknown and malformed ids.
	for _, bad := range []string{"5c6939a8ef2f8e4a1c4a1a1a", "xyz", "", storage.NewSubscriptionID()} {
		if _, err := ss.Get(e.ctx, q, bad); !storage.Is(err, storage.NotFound) {
			e.t.Errorf("get %q: %v, want not found", bad, err)
		}
		if err := ss.Update(e.ctx, q, bad, storage.SubscriptionUpdate{TTL: &ttl}); !storage.Is(err, storage.NotFound) {
			e.t.Errorf("update %q: %v, want not found", bad, err)
		}
		if err := ss.Confirm(e.ctx, q, bad, true); !storage.Is(err, storage.NotFound) {
			e.t.Errorf("confirm %q: %v, want not found", bad, err)
		}
		if err := ss.Delete(e.ctx, q, bad); err != nil {
			e.t.Errorf("delete %q: %v, want nil", bad, err)
		}
	}
	if err := ss.Delete(e.ctx, q, id); err != nil {
		e.t.Fatal(err)
	}
	if _, err := ss.Get(e.ctx, q, id); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("get after delete: %v", err)
	}
	if err := ss.Purge(e.ctx, q); err != nil {
		e.t.Fatal(err)
	}
	if list, _, _ := ss.List(e.ctx, q, storage.ListSubscriptionsOptions{Limit: 10}); len(list) != 0 {
		e.t.Errorf("list after purge: %d subscriptions", len(list))
	}
}

func testSubscriptionPaging(e *env) {
	q := e.queue("paging")
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, e.subscribe(q, fmt.Sprintf("http://127.0.0.1:9/%d", i), time.Hour, false))
	}
	var got []string
	marker := ""
	for page := 0; page < 10; page++ {
		list, next, err := e.d.Subscriptions().List(e.ctx, q, storage.ListSubscriptionsOptions{Marker: marker, Limit: 3})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(list) > 3 {
			e.t.Fatalf("page of %d > limit 3", len(list))
		}
		for _, s := range list {
			got = append(got, s.ID)
		}
		if next == "" {
			break
		}
		marker = next
	}
	if !equalStrings(got, ids) {
		e.t.Errorf("paged ids %v, want creation order %v", got, ids)
	}
	if _, _, err := e.d.Subscriptions().List(e.ctx, q, storage.ListSubscriptionsOptions{Limit: 0}); !storage.Is(err, storage.Invalid) {
		e.t.Errorf("limit 0: %v, want invalid", err)
	}
}

func testSubscriptionTTL(e *env) {
	q := e.queue("ttl")
	ss := e.d.Subscriptions()
	id := e.subscribe(q, "http://127.0.0.1:9/t", time.Minute, false)
	e.clock.Advance(59 * time.Second)
	if _, err := ss.Get(e.ctx, q, id); err != nil {
		e.t.Errorf("get before expiry: %v", err)
	}
	e.clock.Advance(time.Second)
	if _, err := ss.Get(e.ctx, q, id); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("get after expiry: %v, want not found", err)
	}
	if list, _, _ := ss.List(e.ctx, q, storage.ListSubscriptionsOptions{Limit: 10}); len(list) != 0 {
		e.t.Errorf("expired subscription listed")
	}
	// The subscriber may subscribe again and gets a new subscription.
	again := e.subscribe(q, "http://127.0.0.1:9/t", time.Minute, false)
	if again == id {
		e.t.Errorf("expired subscription revived with the same id")
	}
}

func testSubscriptionIsolation(e *env) {
	a, b := e.queueIn("a", "shared"), e.queueIn("b", "shared")
	ss := e.d.Subscriptions()
	id := e.subscribe(a, "http://127.0.0.1:9/iso", time.Hour, false)
	if _, err := ss.Get(e.ctx, b, id); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("project b gets a's subscription: %v", err)
	}
	if list, _, _ := ss.List(e.ctx, b, storage.ListSubscriptionsOptions{Limit: 10}); len(list) != 0 {
		e.t.Errorf("project b lists a's subscriptions")
	}
	_ = ss.Delete(e.ctx, b, id)
	_ = ss.Purge(e.ctx, b)
	if _, err := ss.Get(e.ctx, a, id); err != nil {
		e.t.Errorf("b's delete reached a: %v", err)
	}
	// A subscription neither needs nor creates its queue.
	if ok, _ := e.d.Queues().Exists(e.ctx, a); ok {
		e.t.Errorf("subscribing created the queue")
	}
	if list, _ := e.d.Queues().List(e.ctx, a.Project, storage.ListQueuesOptions{Limit: 10}); len(list) != 0 {
		e.t.Errorf("subscribed queue appears in the queue listing: %v", list)
	}
	// The same subscriber on b is a different subscription.
	if other := e.subscribe(b, "http://127.0.0.1:9/iso", time.Hour, false); other == id {
		e.t.Errorf("b got a's subscription id")
	}
}

func testSubscriptionQueueDelete(e *env) {
	q := e.queue("gone")
	id := e.subscribe(q, "http://127.0.0.1:9/g", time.Hour, false)
	e.post(q, "c", 2, time.Hour)
	if err := e.d.Queues().Delete(e.ctx, q); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.d.Subscriptions().Get(e.ctx, q, id); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("subscription survived its queue: %v", err)
	}
	if st, err := e.d.Deliveries().Stats(e.ctx, q); err != nil || st.Pending != 0 {
		e.t.Errorf("deliveries survived their queue: %+v %v", st, err)
	}
}
