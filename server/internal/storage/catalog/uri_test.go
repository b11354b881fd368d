package catalog_test

import (
	"context"
	"net/url"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	mongodrv "sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// TestCatalogHoldingTwoPoolsOnOneURIStillOpens: a MongoDB catalog written
// before pools' URIs were unique may hold two pools on one URI, and then
// cannot take the unique index. It must still open (else no server could
// start to fix it), refuse a third pool there, and let one of the two go.
func TestCatalogHoldingTwoPoolsOnOneURIStillOpens(t *testing.T) {
	ctx := context.Background()
	uri := testutil.StartFerretDB(t).URI("catalog")
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	client, err := mongodrv.Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	const shared = "redis://127.0.0.1:1/0"
	for _, name := range []string{"a", "b"} {
		if _, err := client.Database("catalog").Collection("pools").InsertOne(ctx,
			bson.D{{Key: "_id", Value: name}, {Key: "uri", Value: shared}, {Key: "weight", Value: 1}, {Key: "flavor", Value: ""}, {Key: "options", Value: ""}}); err != nil {
			t.Fatal(err)
		}
	}
	c := open(t, uri)
	if _, err := c.PutPool(ctx, catalog.Pool{Name: "c", URI: shared, Weight: 1}, true); !storage.Is(err, storage.Conflict) {
		t.Errorf("a third pool on the shared URI: %v, want Conflict", err)
	}
	if err := c.DeletePool(ctx, "b"); err != nil {
		t.Fatalf("delete one of the two: %v", err)
	}
	// Reopened, the catalog takes the index: concurrent registrations on
	// the remaining pool's URI are refused by the server.
	c = open(t, uri)
	if _, err := c.PutPool(ctx, catalog.Pool{Name: "c", URI: shared, Weight: 1}, true); !storage.Is(err, storage.Conflict) {
		t.Errorf("after the duplicate went: %v, want Conflict", err)
	}
	n, err := client.Database("catalog").Collection("pools").CountDocuments(ctx, bson.M{"uri": shared})
	if err != nil || n != 1 {
		t.Errorf("pools on %s: %d (%v), want 1", shared, n, err)
	}
}
