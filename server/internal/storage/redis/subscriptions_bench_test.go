package redis_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// BenchmarkPostSubscribed compares the post script without and with one
// webhook subscription on the queue (the delivery recorded with it).
func BenchmarkPostSubscribed(b *testing.B) {
	for _, subs := range []int{0, 1} {
		b.Run(map[int]string{0: "none", 1: "one"}[subs], func(b *testing.B) {
			d := open(b, storage.SystemClock{})
			q := storage.QueueRef{Project: "bench-subs", Name: "q" + string(rune('0'+subs))}
			ctx := context.Background()
			b.Cleanup(func() { _ = d.Queues().Delete(ctx, q) })
			if subs == 1 {
				if _, _, err := d.Subscriptions().Create(ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:9/h", TTL: time.Hour, Options: storage.Metadata{}}); err != nil {
					b.Fatal(err)
				}
			}
			msg := []storage.NewMessage{{TTL: time.Minute, Body: json.RawMessage(`{"event":"created","n":1}`)}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Messages().Post(ctx, q, "c", msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
