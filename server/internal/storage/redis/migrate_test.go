package redis_test

import (
	"context"
	"net/url"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// openDB opens database db of the package's redis-server: the source and
// the target of a move are two databases, so the same queue can live on
// both.
func openDB(db string) storagetest.Opener {
	return func(t testing.TB, clock storage.Clock) storage.Driver {
		t.Helper()
		if server.r == nil {
			testutil.NoRedis(t)
		}
		u, _ := url.Parse(server.r.URL)
		u.Path = "/" + db
		d, err := redis.Open(context.Background(), u, storagetest.Options(clock))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
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
