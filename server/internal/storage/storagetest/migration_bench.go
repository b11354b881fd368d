package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// BenchMove measures the storage half of moving a queue: b.N 1 KiB
// messages moved from source to target in batches of each size (Take,
// Import, Settle, as the mover calls them), reported as messages per
// second. Posting them first is not timed.
func BenchMove(b *testing.B, source, target Opener) {
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprint("Batch", batch), func(b *testing.B) {
			clock := NewClock()
			src, dst := source(b, clock), target(b, clock)
			from, to := migrationsOf(b, src), migrationsOf(b, dst)
			ctx := context.Background()
			q := storage.QueueRef{Project: "bench-" + randomHex(4), Name: "move"}
			b.Cleanup(func() {
				clock.Advance(tombstoneTTL + time.Minute)
				_ = src.Queues().Delete(ctx, q)
				_ = dst.Queues().Delete(ctx, q)
			})
			for left := b.N; left > 0; left -= 100 {
				mustPost(b, src, q, min(left, 100))
			}
			b.SetBytes(int64(len(body1K)))
			b.ResetTimer()
			s, err := from.Seal(ctx, q, "bench-target")
			if err == nil {
				err = to.Prepare(ctx, q, s.Metadata, s.Seq)
			}
			moved := 0
			for err == nil {
				var bt storage.Batch
				if bt, err = from.Take(ctx, q, batch); err != nil || bt.Empty() {
					break
				}
				if err = to.Import(ctx, q, bt); err == nil {
					err = from.Settle(ctx, q, bt)
				}
				moved += len(bt.Messages)
			}
			if err == nil {
				err = from.Finish(ctx, q, tombstoneTTL)
			}
			b.StopTimer()
			if err != nil || moved != b.N {
				b.Fatalf("moved %d of %d: %v", moved, b.N, err)
			}
			b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func migrationsOf(b *testing.B, d storage.Driver) storage.MigrationStore {
	mg, ok := d.(storage.Migrator)
	if !ok {
		b.Fatalf("driver %T does not implement storage.Migrator", d)
	}
	return mg.Migrations()
}
