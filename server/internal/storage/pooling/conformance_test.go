package pooling_test

import (
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// TestConformance runs the shared suite through the pooled driver over three
// redis-servers and one FerretDB: every case's queues are spread over them.
func TestConformance(t *testing.T) {
	b := startBackends(t, 3, true, testutil.RedisOptions{})
	b.register(t)
	storagetest.Run(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		return openPooled(t, b.catalogURI, storagetest.Options(clock))
	})
}

// TestConformanceNoPools: with no pool registered the pooled driver is the
// default store, unchanged.
func TestConformanceNoPools(t *testing.T) {
	b := startBackends(t, 0, false, testutil.RedisOptions{})
	storagetest.Run(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		return openPooled(t, b.catalogURI, storagetest.Options(clock))
	})
}
