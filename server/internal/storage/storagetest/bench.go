package storagetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// body1K is a ~1 KiB JSON message body, the size the server benchmarks post.
var body1K = json.RawMessage(`{"payload":"` + strings.Repeat("x", 1000) + `"}`)

// Bench runs the shared driver benchmarks. Compare drivers, or one driver
// across changes, with benchstat. The simulated clock stands still, so
// nothing expires while a benchmark runs.
func Bench(b *testing.B, open Opener) {
	benches := []struct {
		name string
		fn   func(b *testing.B, d storage.Driver, q storage.QueueRef)
	}{
		{"Post1x1KiB", benchPost(1)},
		{"Post10x1KiB", benchPost(10)},
		{"PostParallel", benchPostParallel},
		{"Get", benchGet},
		{"List10", benchList},
		{"Stats", benchStats},
		{"PostClaimDelete", benchLifecycle},
		{"Claim10Delete10", benchClaimBatch},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			d := open(b, NewClock())
			q := storage.QueueRef{Project: "bench-" + randomHex(4), Name: "q"}
			b.Cleanup(func() { _ = d.Queues().Delete(context.Background(), q) })
			b.ReportAllocs()
			bb.fn(b, d, q)
		})
	}
}

func mustPost(b *testing.B, d storage.Driver, q storage.QueueRef, n int) []string {
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: body1K}
	}
	ids, err := d.Messages().Post(context.Background(), q, "bench", msgs)
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func benchPost(n int) func(b *testing.B, d storage.Driver, q storage.QueueRef) {
	return func(b *testing.B, d storage.Driver, q storage.QueueRef) {
		msgs := make([]storage.NewMessage, n)
		for i := range msgs {
			msgs[i] = storage.NewMessage{TTL: time.Hour, Body: body1K}
		}
		ctx := context.Background()
		b.SetBytes(int64(n * len(body1K)))
		for b.Loop() {
			if _, err := d.Messages().Post(ctx, q, "bench", msgs); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchPostParallel(b *testing.B, d storage.Driver, q storage.QueueRef) {
	msgs := []storage.NewMessage{{TTL: time.Hour, Body: body1K}}
	b.SetBytes(int64(len(body1K)))
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := d.Messages().Post(ctx, q, "bench", msgs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchGet(b *testing.B, d storage.Driver, q storage.QueueRef) {
	ids := mustPost(b, d, q, 100)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := d.Messages().Get(ctx, q, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func benchList(b *testing.B, d storage.Driver, q storage.QueueRef) {
	mustPost(b, d, q, 100)
	ctx := context.Background()
	opts := storage.ListMessagesOptions{Limit: 10, ClientID: "reader"}
	for b.Loop() {
		if msgs, _, err := d.Messages().List(ctx, q, opts); err != nil || len(msgs) != 10 {
			b.Fatal(len(msgs), err)
		}
	}
}

func benchStats(b *testing.B, d storage.Driver, q storage.QueueRef) {
	mustPost(b, d, q, 100)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.Queues().Stats(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLifecycle is one message's whole life: post, claim, delete with the
// claim id - three store calls per op.
func benchLifecycle(b *testing.B, d storage.Driver, q storage.QueueRef) {
	ctx := context.Background()
	msgs := []storage.NewMessage{{TTL: time.Hour, Body: body1K}}
	opts := storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1}
	for b.Loop() {
		if _, err := d.Messages().Post(ctx, q, "bench", msgs); err != nil {
			b.Fatal(err)
		}
		c, err := d.Claims().Create(ctx, q, opts)
		if err != nil || len(c.Messages) != 1 {
			b.Fatal(len(c.Messages), err)
		}
		if err := d.Messages().Delete(ctx, q, c.Messages[0].ID, c.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// benchClaimBatch claims 10 messages and deletes them one by one as a
// worker does (11 store calls per op); the queue is refilled off the clock.
func benchClaimBatch(b *testing.B, d storage.Driver, q storage.QueueRef) {
	ctx := context.Background()
	opts := storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10}
	for b.Loop() {
		b.StopTimer()
		mustPost(b, d, q, 10)
		b.StartTimer()
		c, err := d.Claims().Create(ctx, q, opts)
		if err != nil || len(c.Messages) != 10 {
			b.Fatal(len(c.Messages), err)
		}
		for _, m := range c.Messages {
			if err := d.Messages().Delete(ctx, q, m.ID, c.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
}
