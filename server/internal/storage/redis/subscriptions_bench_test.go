package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// BenchmarkPostSubscribed: the post script with 0, 1 and 20 webhook
// subscriptions on the queue (the deliveries recorded with the messages),
// posting one message or a batch of 100 per call.
//
//	go test -run '^$' -bench BenchmarkPostSubscribed ./internal/storage/redis
func BenchmarkPostSubscribed(b *testing.B) {
	for _, subs := range []int{0, 1, 20} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("subs=%d/batch=%d", subs, batch), func(b *testing.B) {
				d := open(b, storage.SystemClock{})
				q := storage.QueueRef{Project: "bench-subs", Name: fmt.Sprintf("q%d-%d", subs, batch)}
				ctx := context.Background()
				b.Cleanup(func() { _ = d.Queues().Delete(ctx, q) })
				for i := range subs {
					sub := storage.Subscription{Subscriber: fmt.Sprintf("http://127.0.0.1:9/%d", i), TTL: time.Hour, Options: storage.Metadata{}}
					if _, _, err := d.Subscriptions().Create(ctx, q, sub); err != nil {
						b.Fatal(err)
					}
				}
				msgs := make([]storage.NewMessage, batch)
				for i := range msgs {
					msgs[i] = storage.NewMessage{TTL: time.Minute, Body: json.RawMessage(`{"event":"created","n":1}`)}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
						b.Fatal(err)
					}
				}
				if subs > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch*subs)/1000, "us/delivery")
				}
			})
		}
	}
}
