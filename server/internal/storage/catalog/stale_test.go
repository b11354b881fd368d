package catalog_test

import (
	"context"
	"testing"
	"time"

	"sluice.dev/server/internal/storage/catalog"
)

// TestStaleReplicaPlacesOnNewFlavor: a pool and flavor registered through
// one replica are usable at once through another whose cache has not polled
// yet. The operator marks a Pool Ready as soon as it registered the shards,
// and a client creating a queue in that flavor right after may reach any
// replica: refusing it for up to one poll would be a wrong 400.
func TestStaleReplicaPlacesOnNewFlavor(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		admin := open(t, uri)
		st, err := catalog.OpenStore(ctx, uri)
		if err != nil {
			t.Fatal(err)
		}
		// An hour between polls: only a refresh on the refusal path helps.
		stale, err := catalog.New(ctx, st, catalog.Options{Refresh: time.Hour,
			Probe: func(context.Context, string) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stale.Close() })

		mustPool(t, admin, "p1", 100)
		if _, err := admin.PutFlavor(ctx, catalog.Flavor{Name: "fresh", Pools: []string{"p1"}}); err != nil {
			t.Fatal(err)
		}
		if p, err := stale.Assign(ctx, q(1), "fresh"); err != nil || p != "p1" {
			t.Fatalf("assign through the stale replica: %q, %v", p, err)
		}
		// Refusals still come when the catalog agrees with them.
		if _, err := stale.Assign(ctx, q(2), "nosuch"); err == nil {
			t.Fatal("unknown flavor accepted")
		}
	})
}
