package redis_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/storagetest"
)

// openDB opens database db of the package's redis-server: the source and
// the target of a move are two databases, so the same queue can live on
// both.
func openDB(db string) storagetest.Opener {
	return func(t testing.TB, clock storage.Clock) storage.Driver {
		t.Helper()
		return openURI(t, clock, db)
	}
}

func TestMigration(t *testing.T) { storagetest.RunMigration(t, openDB("1"), openDB("2")) }

// A batch taken by one kind of driver imports into another: everything a
// batch carries is in storage.Batch, nothing driver-specific.
func TestMigrationBetweenKinds(t *testing.T) {
	mem := func(_ testing.TB, clock storage.Clock) storage.Driver { return memory.New(storagetest.Options(clock)) }
	t.Run("MemoryToRedis", func(t *testing.T) { storagetest.RunMigration(t, mem, openDB("1")) })
	t.Run("RedisToMemory", func(t *testing.T) { storagetest.RunMigration(t, openDB("1"), mem) })
}

func BenchmarkMove(b *testing.B) { storagetest.BenchMove(b, openDB("1"), openDB("2")) }

// The largest batch the server allows (--migrate-batch 10000) moves in one
// Take, Import and SettleAndTake: every script handles its thousands of
// arguments and reply fields without overflowing Lua's stack.
func TestMoveLargestBatch(t *testing.T) {
	const n = 10000
	ctx := context.Background()
	clock := storagetest.NewClock()
	src, dst := openDB("1")(t, clock), openDB("2")(t, clock)
	from := src.(storage.Migrator).Migrations()
	to := dst.(storage.Migrator).Migrations()
	q := storage.QueueRef{Project: "large-batch", Name: "q"}
	t.Cleanup(func() {
		clock.Advance(2 * time.Hour)
		_ = src.Queues().Delete(ctx, q)
		_ = dst.Queues().Delete(ctx, q)
	})
	msgs := make([]storage.NewMessage, 500)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(`"x"`)}
	}
	for i := 0; i < n/len(msgs); i++ {
		if _, err := src.Messages().Post(ctx, q, "c", msgs); err != nil {
			t.Fatal(err)
		}
	}
	sealed, err := from.Seal(ctx, q, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Prepare(ctx, q, sealed.Metadata, sealed.Seq); err != nil {
		t.Fatal(err)
	}
	b, err := from.Take(ctx, q, n)
	if err != nil || len(b.Messages) != n {
		t.Fatalf("take: %d messages, %v", len(b.Messages), err)
	}
	if err := to.Import(ctx, q, b); err != nil {
		t.Fatalf("import: %v", err)
	}
	next, err := from.(storage.SettleTaker).SettleAndTake(ctx, q, b, n)
	if err != nil || !next.Empty() {
		t.Fatalf("settle and take: %d messages, %v", len(next.Messages), err)
	}
	if st, err := dst.Queues().Stats(ctx, q); err != nil || st.Total != n {
		t.Fatalf("target stats %+v, %v; want %d messages", st, err, n)
	}
	if _, err := src.Messages().Get(ctx, q, b.Messages[n-1].ID); err == nil {
		t.Fatal("get of a settled message on the source: found, want Moved")
	} else if to, ok := storage.MovedTo(err); !ok || to != "elsewhere" {
		t.Fatalf("get of a settled message on the source: %v, want Moved(elsewhere)", err)
	}
}

// A queue whose consumers stopped long ago holds more expired entries in
// its stream area than one trim's budget (500): once every live message
// moved, Finish drops them all and leaves the tombstone instead of
// reporting messages left to move.
func TestFinishAfterManyExpired(t *testing.T) {
	ctx := context.Background()
	clock := storagetest.NewClock()
	src := openDB("1")(t, clock)
	from := src.(storage.Migrator).Migrations()
	q := storage.QueueRef{Project: "expired-backlog", Name: "q"}
	t.Cleanup(func() { _ = src.Queues().Delete(ctx, q) })
	msgs := make([]storage.NewMessage, 600)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: time.Minute, Body: json.RawMessage(`"x"`)}
	}
	for range 3 {
		if _, err := src.Messages().Post(ctx, q, "c", msgs); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	if _, err := from.Seal(ctx, q, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if b, err := from.Take(ctx, q, 100); err != nil || !b.Empty() {
		t.Fatalf("take of a queue with only expired messages: %d messages, %v", len(b.Messages), err)
	}
	if err := from.Finish(ctx, q, time.Minute); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if _, err := src.Messages().Post(ctx, q, "c", msgs[:1]); err == nil {
		t.Fatal("post after finish: stored, want Moved")
	} else if to, ok := storage.MovedTo(err); !ok || to != "elsewhere" {
		t.Fatalf("post after finish: %v, want Moved(elsewhere)", err)
	}
}
