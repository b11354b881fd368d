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
	"sluice.dev/server/internal/testutil"
)

// TestLargeWipesLeaveTheShardServing: purging or deleting a queue of many
// messages must not hold its Redis shard for the whole queue (one script
// over a million messages held every queue of the shard for seconds, and
// past Redis' busy-script threshold made every other client fail). While
// each drawn queue (sizes over several wipe steps, some messages claimed,
// some delayed) is wiped, a second replica's stats calls on it are served
// in between and see the count falling; afterwards nothing of its
// messages is left in Redis, and a purged queue is still there.
func TestLargeWipesLeaveTheShardServing(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	observer := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(19, uint64(time.Now().UnixNano())))
	for round := range 4 {
		q := queueRef("p", fmt.Sprintf("large-%d", round))
		n := 8*wipeStep + rng.IntN(4*wipeStep)
		for posted := 0; posted < n; {
			msgs := make([]storage.NewMessage, min(1000, n-posted))
			for i := range msgs {
				msgs[i] = storage.NewMessage{TTL: time.Duration(60+rng.IntN(3600)) * time.Second, Body: json.RawMessage(`{"n":1}`)}
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
		purge := rng.IntN(2) == 0

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
				st, err := observer.Queues().Stats(ctx, q)
				if err == nil && st.Total > 0 && st.Total < n {
					between = append(between, st.Total)
				}
			}
		})
		time.Sleep(20 * time.Millisecond) // the observer is asking before the wipe starts
		var err error
		if purge {
			err = d.Queues().Purge(ctx, q)
		} else {
			err = d.Queues().Delete(ctx, q)
		}
		close(done)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: wiping %d messages (purge %v): %v", round, n, purge, err)
		}
		if len(between) == 0 {
			t.Errorf("round %d: no stats call was served while %d messages were wiped (purge %v): one script held the shard", round, n, purge)
		}
		left, err := d.c.Keys(ctx, escapeGlob(scope(q))+":m:*").Result()
		if err != nil || len(left) > 0 {
			t.Errorf("round %d: %d message keys left after the wipe (%v)", round, len(left), err)
		}
		if exists, err := d.Queues().Exists(ctx, q); err != nil || exists != purge {
			t.Errorf("round %d: queue exists %v after purge %v (%v)", round, exists, purge, err)
		}
		if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != 0 {
			t.Errorf("round %d: stats %+v after the wipe (%v)", round, st, err)
		}
	}
}

// BenchmarkWipe purges a queue of n small messages while a second replica
// asks for another queue's stats on the same shard, back to back: how long
// the purge takes (ns/op) and the longest stats call meanwhile
// (worst-other-ms), in steps (Purge) and, for comparison, as the one
// script call it used to be.
//
//	go test -run '^$' -bench BenchmarkWipe -benchtime 3x ./internal/storage/redis
//
// With the default 2 s read timeout, the one script over a million
// messages fails with an i/o timeout, as a purge did.
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
	oneScript := func(q storage.QueueRef) error {
		keys := queueKeys(q)
		return queueDelete.Run(ctx, d.fc, keys, q.Name, keys[0], "1", d.nowMS()).Err()
	}
	for _, n := range []int{100_000, 1_000_000} {
		for _, mode := range []string{"steps", "one-script"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				q := queueRef("p", "large")
				var worst time.Duration
				for range b.N {
					b.StopTimer()
					for posted := 0; posted < n; posted += 1000 {
						msgs := make([]storage.NewMessage, 1000)
						for i := range msgs {
							msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(`{"event":"x","n":12345}`)}
						}
						if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
							b.Fatal(err)
						}
					}
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
					var err error
					if mode == "steps" {
						err = d.Queues().Purge(ctx, q)
					} else {
						err = oneScript(q)
					}
					b.StopTimer()
					close(done)
					worst = max(worst, <-slowest)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(worst.Microseconds())/1000, "worst-other-ms")
			})
		}
	}
}
