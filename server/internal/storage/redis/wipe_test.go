package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// TestLargeWipesLeaveTheShardServing: purging or deleting a queue of many
// messages, or deleting subscriptions with a long backlog of pending
// deliveries, must not hold its Redis shard for all of it (one script over
// a million messages held every queue of the shard for seconds, and past
// Redis' busy-script threshold made every other client fail). Each round
// draws a queue (sizes over several wipe steps, some messages claimed,
// some delayed, none to two subscriptions) and a wipe (purge, queue
// delete, one subscription's delete, every subscription's purge); a second
// replica asking meanwhile is served in between and sees the count it
// watches fall. Afterwards nothing wiped is left in Redis.
func TestLargeWipesLeaveTheShardServing(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	observer := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(19, uint64(time.Now().UnixNano())))
	wipes := []string{"purge", "queue delete", "subscription delete", "subscription purge"}
	for round := range 8 {
		q := queueRef("p", fmt.Sprintf("large-%d", round))
		wipe := wipes[rng.IntN(len(wipes))]
		var subs []string
		for i := range rng.IntN(3) {
			id, _, err := d.Subscriptions().Create(ctx, q, storage.Subscription{
				Subscriber: fmt.Sprintf("http://127.0.0.1:9/%d", i), TTL: time.Hour, Options: storage.Metadata{}})
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, id)
		}
		if len(subs) == 0 && wipe != "purge" && wipe != "queue delete" {
			wipe = "queue delete"
		}
		n := 6*wipeStep + rng.IntN(4*wipeStep)
		for posted := 0; posted < n; {
			msgs := make([]storage.NewMessage, min(1000, n-posted))
			for i := range msgs {
				msgs[i] = storage.NewMessage{TTL: time.Duration(600+rng.IntN(3600)) * time.Second, Body: json.RawMessage(`{"n":1}`)}
				if rng.IntN(10) == 0 {
					msgs[i].Delay = time.Duration(1+rng.IntN(900)) * time.Second
				}
			}
			if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
				t.Fatal(err)
			}
			posted += len(msgs)
		}
		for range rng.IntN(20) {
			if _, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 20}); err != nil {
				t.Fatal(err)
			}
		}
		// What the observer watches: the queue's messages, or the pending
		// deliveries of every subscription (n each).
		watch, full := func() (int, error) {
			st, err := observer.Queues().Stats(ctx, q)
			return st.Total, err
		}, n
		if wipe == "subscription delete" || wipe == "subscription purge" {
			watch, full = func() (int, error) {
				st, err := observer.Deliveries().Stats(ctx, q)
				return int(st.Pending), err
			}, n*len(subs)
		}

		var (
			wg      sync.WaitGroup
			done    = make(chan struct{})
			between []int
		)
		wg.Go(func() {
			deadline := time.Now().Add(time.Minute)
			for range 100000 {
				select {
				case <-done:
					return
				default:
				}
				if time.Now().After(deadline) {
					return
				}
				if got, err := watch(); err == nil && got > 0 && got < full {
					between = append(between, got)
				}
			}
		})
		time.Sleep(20 * time.Millisecond) // the observer is asking before the wipe starts
		var err error
		switch wipe {
		case "purge":
			err = d.Queues().Purge(ctx, q)
		case "queue delete":
			err = d.Queues().Delete(ctx, q)
		case "subscription delete":
			err = d.Subscriptions().Delete(ctx, q, subs[0])
		case "subscription purge":
			err = d.Subscriptions().Purge(ctx, q)
		}
		close(done)
		wg.Wait()
		what := fmt.Sprintf("round %d: %s of a queue of %d messages, %d subscriptions", round, wipe, n, len(subs))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(between) == 0 {
			t.Errorf("%s: nothing was served while it ran: one script held the shard", what)
		}
		var left []string
		switch wipe {
		case "purge", "queue delete":
			left = keys(t, d, scope(q)+":m:", "*")
			if exists, err := d.Queues().Exists(ctx, q); err != nil || exists != (wipe == "purge") {
				t.Errorf("%s: queue exists %v afterwards (%v)", what, exists, err)
			}
		case "subscription delete":
			left = keys(t, d, scope(q)+":dp:"+subs[0], "")
		case "subscription purge":
			left = keys(t, d, scope(q)+":dp:", "*")
		}
		if wipe != "purge" && wipe != "subscription delete" {
			left = append(left, keys(t, d, scope(q)+":n:", "*")...)
		}
		if len(left) > 0 {
			t.Errorf("%s: %d keys left, such as %s", what, len(left), left[0])
		}
		_ = d.Queues().Delete(ctx, q)
	}
}

// TestLapsedSubscriptionDrainsInSteps: a subscription that lapses with a
// backlog larger than one call's cleanup budget is dropped over several
// calls, each dropping a bounded share of its deliveries; meanwhile it is
// not listed, a new subscription of its subscriber is a new one, another
// may take its subscriber, and once drained nothing of it is left.
func TestLapsedSubscriptionDrainsInSteps(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	clock := storagetest.NewClock()
	d := openAt(t, r.URL, clock)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(23, uint64(time.Now().UnixNano())))
	q := queueRef("p", "lapsing")
	hook := storage.Subscription{Subscriber: "http://127.0.0.1:9/h", TTL: time.Minute, Options: storage.Metadata{}}
	old, _, err := d.Subscriptions().Create(ctx, q, hook)
	if err != nil {
		t.Fatal(err)
	}
	n := 6*500 + rng.IntN(2000) // 500: lib.lua's BUDGET
	for posted := 0; posted < n; posted += 500 {
		if _, err := post(t, d, q, min(500, n-posted), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	backlog := func() int64 { return d.c.ZCard(ctx, scope(q)+":dp:"+old).Val() }
	for calls := 0; backlog() > 0; calls++ {
		if calls > n/500+1 {
			t.Fatalf("%d pending deliveries of the lapsed subscription left after %d calls", backlog(), calls)
		}
		before := backlog()
		subs, _, err := d.Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(subs) != 0 {
			t.Fatalf("a lapsed subscription is listed: %+v", subs)
		}
		if dropped := before - backlog(); dropped > 500 || dropped <= 0 && before > 0 {
			t.Fatalf("one call dropped %d of %d pending deliveries, want 1..500", dropped, before)
		}
		if calls == 0 {
			other := hook
			other.Subscriber = "http://127.0.0.1:9/other"
			id, _, err := d.Subscriptions().Create(ctx, q, other)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Subscriptions().Update(ctx, q, id, storage.SubscriptionUpdate{Subscriber: &hook.Subscriber}); err != nil {
				t.Fatalf("taking the lapsed subscription's subscriber while it drains: %v", err)
			}
			if err := d.Subscriptions().Delete(ctx, q, id); err != nil {
				t.Fatal(err)
			}
			id, created, err := d.Subscriptions().Create(ctx, q, hook)
			if err != nil || !created || id == old {
				t.Fatalf("subscribing again while the lapsed one drains: %s created %v (%v)", id, created, err)
			}
			if err := d.Subscriptions().Delete(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := d.Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if left := keys(t, d, scope(q)+":s:", "*"); len(left) > 0 {
		t.Errorf("the drained subscription is still there: %v", left)
	}
	if left := keys(t, d, scope(q)+":n:", "*"); len(left) > 0 {
		t.Errorf("%d notification bodies left, such as %s", len(left), left[0])
	}
}

// TestWipeScriptsTakeAnyBacklog: the delete scripts that end a wipe still
// remove everything in one call when the steps left much behind (posts
// racing a wipe, steps cut short): a backlog beyond what Lua can unpack
// at once (about 8,000) included.
func TestWipeScriptsTakeAnyBacklog(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	for _, wipe := range []string{"subscription", "queue"} {
		q := queueRef("p", "backlog-"+wipe)
		sid, _, err := d.Subscriptions().Create(ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:9/h", TTL: time.Hour, Options: storage.Metadata{}})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if _, err := post(t, d, q, 1000, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		if wipe == "subscription" {
			err = subDelete.Run(ctx, d.fc, []string{scope(q)}, sid).Err()
		} else {
			err = deleteInOneCall(ctx, d, q, "0")
		}
		if err != nil {
			t.Fatalf("%s delete over 10,000 pending deliveries in one call: %v", wipe, err)
		}
		if left := append(keys(t, d, scope(q)+":dp:", "*"), keys(t, d, scope(q)+":n:", "*")...); len(left) > 0 {
			t.Errorf("%s delete: %d keys left, such as %s", wipe, len(left), left[0])
		}
	}
}

// deleteInOneCall runs the queue delete script alone (keep "1": a purge),
// as a purge or queue delete did before wipes went in steps.
func deleteInOneCall(ctx context.Context, d *Driver, q storage.QueueRef, keep string) error {
	keys := queueKeys(q)
	return queueDelete.Run(ctx, d.fc, keys, q.Name, keys[0], keep, d.nowMS()).Err()
}

// keys lists the keys named prefix (taken as it is) then glob.
func keys(t *testing.T, d *Driver, prefix, glob string) []string {
	t.Helper()
	ks, err := d.c.Keys(context.Background(), escapeGlob(prefix)+glob).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// BenchmarkWipe wipes n small messages (a purge) or n pending deliveries
// (a subscription's delete) while a second replica asks for another
// queue's stats on the same shard, back to back: how long the wipe takes
// (ns/op) and the longest stats call meanwhile (worst-other-ms), in steps
// and, for comparison, as the one script call it used to be.
//
//	go test -run '^$' -bench BenchmarkWipe -benchtime 3x ./internal/storage/redis
//
// With the default 2 s read timeout, one script over a million messages
// fails with an i/o timeout, as a purge did.
func BenchmarkWipe(b *testing.B) {
	r := testutil.StartRedis(b, testutil.RedisOptions{})
	u, _ := url.Parse(r.URL + "?read_timeout=60s")
	open := func() *Driver {
		d, err := Open(context.Background(), u, storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	}
	d, observer := open(), open()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	other := queueRef("p", "other")
	if _, err := d.Messages().Post(ctx, other, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); err != nil {
		b.Fatal(err)
	}
	// fill posts n messages; with a subscription, each is a pending delivery.
	fill := func(q storage.QueueRef, n int, subscribed bool) (sid string) {
		if subscribed {
			id, _, err := d.Subscriptions().Create(ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:9/h", TTL: time.Hour, Options: storage.Metadata{}})
			if err != nil {
				b.Fatal(err)
			}
			sid = id
		}
		for posted := 0; posted < n; posted += 1000 {
			msgs := make([]storage.NewMessage, 1000)
			for i := range msgs {
				msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(`{"event":"x","n":12345}`)}
			}
			if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
				b.Fatal(err)
			}
		}
		return sid
	}
	wipes := map[string]func(q storage.QueueRef, sid string, steps bool) error{
		"messages": func(q storage.QueueRef, _ string, steps bool) error {
			if steps {
				return d.Queues().Purge(ctx, q)
			}
			return deleteInOneCall(ctx, d, q, "1")
		},
		"deliveries": func(q storage.QueueRef, sid string, steps bool) error {
			if steps {
				return d.Subscriptions().Delete(ctx, q, sid)
			}
			return subDelete.Run(ctx, d.fc, []string{scope(q)}, sid).Err()
		},
	}
	for _, c := range []struct {
		what string
		n    int
	}{{"messages", 100_000}, {"messages", 1_000_000}, {"deliveries", 100_000}, {"deliveries", 300_000}} {
		for _, steps := range []bool{true, false} {
			mode := map[bool]string{true: "steps", false: "one-script"}[steps]
			b.Run(fmt.Sprintf("%s=%d/%s", c.what, c.n, mode), func(b *testing.B) {
				var worst time.Duration
				for i := range b.N {
					b.StopTimer()
					q := queueRef("p", fmt.Sprintf("large-%s-%d-%s-%d", c.what, c.n, mode, i))
					sid := fill(q, c.n, c.what == "deliveries")
					done, slowest := make(chan struct{}), make(chan time.Duration)
					go func() {
						var w time.Duration
						for {
							select {
							case <-done:
								slowest <- w
								return
							default:
							}
							start := time.Now()
							_, _ = observer.Queues().Stats(ctx, other)
							w = max(w, time.Since(start))
						}
					}()
					b.StartTimer()
					err := wipes[c.what](q, sid, steps)
					b.StopTimer()
					close(done)
					worst = max(worst, <-slowest)
					if err != nil {
						b.Fatal(err)
					}
					if err := d.Queues().Delete(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(worst.Microseconds())/1000, "worst-other-ms")
			})
		}
	}
}
