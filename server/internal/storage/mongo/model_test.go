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

// TestModel runs the differential test against the reference model on a
// real FerretDB; it is the slowest backend, so `go test` runs few sequences
// (`make fuzz` runs many).
func TestModel(t *testing.T) {
	f := testutil.StartFerretDB(t)
	u, _ := url.Parse(f.URI("model"))
	storagetest.RunModel(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		d, err := mongo.Open(context.Background(), u, storagetest.Options(clock))
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}, storagetest.ModelOptions{Checks: 30})
}
