package pooling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// BenchmarkDirect and BenchmarkPooled run the shared driver benchmarks on
// the same redis-server, used directly and as the only pool behind the
// catalog: the difference is the cost of routing.
func BenchmarkDirect(b *testing.B) {
	r := testutil.StartRedis(b, testutil.RedisOptions{})
	u, _ := url.Parse(r.URL)
	storagetest.Bench(b, func(tb testing.TB, clock storage.Clock) storage.Driver {
		d, err := redis.Open(context.Background(), u, storagetest.Options(clock))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { d.Close() })
		return d
	})
}

func BenchmarkPooled(b *testing.B) {
	mgmt := testutil.StartRedis(b, testutil.RedisOptions{})
	r := testutil.StartRedis(b, testutil.RedisOptions{})
	cat := openCatalog(b, mgmt.URL)
	if _, err := cat.PutPool(context.Background(), catalog.Pool{Name: "only", URI: r.URL, Weight: 1}, false); err != nil {
		b.Fatal(err)
	}
	storagetest.Bench(b, func(tb testing.TB, clock storage.Clock) storage.Driver {
		return openPooled(tb, mgmt.URL, storagetest.Options(clock))
	})
}

// BenchmarkPoolsScaling posts 1 KiB messages from many goroutines to 64
// queues spread over 1, 2 and 4 redis-server pools: aggregate throughput
// as pools are added (on a machine with few cores the Redis processes and
// the client compete for them, which caps the curve).
func BenchmarkPoolsScaling(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			ctx := context.Background()
			mgmt := testutil.StartRedis(b, testutil.RedisOptions{})
			cat := openCatalog(b, mgmt.URL)
			for i := 0; i < n; i++ {
				r := testutil.StartRedis(b, testutil.RedisOptions{})
				if _, err := cat.PutPool(ctx, catalog.Pool{Name: fmt.Sprintf("r%d", i), URI: r.URL, Weight: 1}, false); err != nil {
					b.Fatal(err)
				}
			}
			d := openPooled(b, mgmt.URL, storage.Options{})
			const queues = 64
			refs := make([]storage.QueueRef, queues)
			used := map[string]int{}
			for i := range refs {
				refs[i] = storage.QueueRef{Project: "scale", Name: fmt.Sprintf("q%02d", i)}
				if _, err := d.Queues().Create(ctx, refs[i], nil); err != nil {
					b.Fatal(err)
				}
				p, _ := cat.Locate(ctx, refs[i])
				used[p]++
			}
			b.Cleanup(func() {
				for _, q := range refs {
					_ = d.Queues().Delete(ctx, q)
				}
			})
			if len(used) != n {
				b.Fatalf("64 queues used %d of %d pools: %v", len(used), n, used)
			}
			body := json.RawMessage(`{"payload":"` + strings.Repeat("x", 1000) + `"}`)
			msgs := []storage.NewMessage{{TTL: time.Hour, Body: body}}
			var next atomic.Int64
			b.SetBytes(int64(len(body)))
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					q := refs[next.Add(1)%queues]
					if _, err := d.Messages().Post(ctx, q, "bench", msgs); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRouting isolates what the pooled driver adds per call: the same
// shared benchmarks on a memory store used directly and as the only pool
// behind the catalog. Against a network backend the difference is the same
// number of nanoseconds, on top of a round trip.
func BenchmarkRouting(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		storagetest.Bench(b, func(tb testing.TB, clock storage.Clock) storage.Driver {
			d, err := storage.Open(context.Background(), "memory", storagetest.Options(clock))
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { d.Close() })
			return d
		})
	})
	b.Run("pooled", func(b *testing.B) {
		mgmt := testutil.StartRedis(b, testutil.RedisOptions{})
		st, err := catalog.OpenStore(context.Background(), mgmt.URL)
		if err != nil {
			b.Fatal(err)
		}
		// Straight into the store: the admin API accepts only network
		// URIs, but the router opens any registered driver.
		if _, err := st.PutPool(context.Background(), catalog.Pool{Name: "mem", URI: "memory", Weight: 1}); err != nil {
			b.Fatal(err)
		}
		st.Close()
		storagetest.Bench(b, func(tb testing.TB, clock storage.Clock) storage.Driver {
			return openPooled(tb, mgmt.URL, storagetest.Options(clock))
		})
	})
}
