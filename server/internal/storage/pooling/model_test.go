package pooling_test

import (
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// TestModel runs the differential test through the pooled driver over two
// redis-servers and one FerretDB, so a sequence's two queues (and a
// dead-letter queue placed with its source) land on different backends.
func TestModel(t *testing.T) {
	b := startBackends(t, 2, true, testutil.RedisOptions{})
	b.register(t)
	storagetest.RunModel(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		return openPooled(t, b.catalogURI, storagetest.Options(clock))
	}, storagetest.ModelOptions{Checks: 40, PlacedDeadLetters: true})
}
