package mongo_test

import (
	"context"
	"net/url"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// TestConformance runs the shared driver suite against a real FerretDB
// process; every case opens its own driver on the same database (the suite
// gives each case its own projects).
func TestConformance(t *testing.T) {
	f := testutil.StartFerretDB(t)
	u, _ := url.Parse(f.URI("conformance"))
	storagetest.Run(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		d, err := mongo.Open(context.Background(), u, storagetest.Options(clock))
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
}
