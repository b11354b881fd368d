package catalog_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
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

// hungLookups is a catalog store whose host has gone while connections to
// it hang (a killed pod's address): once hung, Lookup returns only when its
// context ends.
type hungLookups struct {
	catalog.Store
	hung    atomic.Bool
	lookups atomic.Int32
}

func (h *hungLookups) Lookup(ctx context.Context, q storage.QueueRef) (string, error) {
	if !h.hung.Load() {
		return h.Store.Lookup(ctx, q)
	}
	h.lookups.Add(1)
	<-ctx.Done()
	return "", ctx.Err()
}

// TestStalePlacementOutlivesAHungCatalog: a queue placed before the
// catalog stopped answering keeps being routed when its cached placement
// passes its TTL. Checking it must not take the request's deadline (the
// storage call after it would fail, a 503 for a queue that was fine), and
// the next request must not check again at once.
func TestStalePlacementOutlivesAHungCatalog(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		admin := open(t, uri)
		mustPool(t, admin, "p1", 100)
		st, err := catalog.OpenStore(ctx, uri)
		if err != nil {
			t.Fatal(err)
		}
		h := &hungLookups{Store: st}
		c, err := catalog.New(ctx, h, catalog.Options{Refresh: time.Hour, PlacementTTL: 50 * time.Millisecond,
			Probe: func(context.Context, string) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if p, err := c.Assign(ctx, q(1), ""); err != nil || p != "p1" {
			t.Fatalf("assign: %q, %v", p, err)
		}
		time.Sleep(100 * time.Millisecond)
		h.hung.Store(true)
		for i := 0; i < 2; i++ {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			p, err := c.Locate(rctx, q(1))
			left := rctx.Err()
			cancel()
			if err != nil || p != "p1" || left != nil {
				t.Fatalf("locate %d with the catalog hung: %q, %v; the request's context: %v", i, p, err, left)
			}
		}
		if n := h.lookups.Load(); n != 1 {
			t.Fatalf("%d lookups of the hung catalog for two requests, want 1", n)
		}
	})
}
