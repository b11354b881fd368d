package mongo_test

import (
	"context"
	"net/url"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// opener opens a driver on database db of a real FerretDB process, closed
// when the test ends; every case gets its own driver on the same database
// (the suites give each case its own projects).
func opener(t testing.TB, db string) func(t testing.TB, clock storage.Clock) storage.Driver {
	f := testutil.StartFerretDB(t)
	u, _ := url.Parse(f.URI(db))
	return func(t testing.TB, clock storage.Clock) storage.Driver {
		d, err := mongo.Open(context.Background(), u, storagetest.Options(clock))
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
}

// TestConformance runs the shared driver suite.
func TestConformance(t *testing.T) {
	storagetest.Run(t, opener(t, "conformance"))
}

// TestModel runs the differential test against the reference model; FerretDB
// is the slowest backend, so `go test` runs few sequences (`make fuzz` runs many).
func TestModel(t *testing.T) {
	storagetest.RunModel(t, opener(t, "model"), storagetest.ModelOptions{Checks: 30})
}

// TestMigration runs the shared suite for moving a queue between two
// FerretDB backends.
func TestMigration(t *testing.T) {
	storagetest.RunMigration(t, opener(t, "move_from"), opener(t, "move_to"))
}

// TestMigrationAcrossKinds moves queues between FerretDB and the memory
// driver both ways: the two number their messages differently (clock
// microseconds here, a counter there), and FIFO must survive either way.
func TestMigrationAcrossKinds(t *testing.T) {
	mem := func(t testing.TB, clock storage.Clock) storage.Driver { return memory.New(storagetest.Options(clock)) }
	t.Run("ToMemory", func(t *testing.T) { storagetest.RunMigration(t, opener(t, "move_out"), mem) })
	t.Run("FromMemory", func(t *testing.T) { storagetest.RunMigration(t, mem, opener(t, "move_in")) })
}

// BenchmarkDriver runs the shared driver benchmarks on FerretDB (see
// docs/benchmarks.md for how they compare across changes).
func BenchmarkDriver(b *testing.B) { storagetest.Bench(b, opener(b, "bench")) }

// BenchmarkMove measures Take, Import and Settle between two FerretDB
// backends (docs/benchmarks.md).
func BenchmarkMove(b *testing.B) {
	storagetest.BenchMove(b, opener(b, "bench_from"), opener(b, "bench_to"))
}
