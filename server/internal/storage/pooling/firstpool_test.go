package pooling_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/pooling"
	"sluice.dev/server/internal/testutil"
)

// TestFirstPoolReachesReplicasBeforeTheirPoll: two replicas whose catalog
// caches were loaded before any pool existed (and would not poll again for
// an hour) serve a queue placed in the first pool, registered meanwhile.
// A replica that trusted its empty pool list would create the queue on its
// own default store, or answer from it that the queue is empty, while the
// other replica stores the messages in the pool.
func TestFirstPoolReachesReplicasBeforeTheirPoll(t *testing.T) {
	b := startBackends(t, 1, false, testutil.RedisOptions{})
	ctx := context.Background()
	replica := func() *pooling.Driver {
		return openPooledOn(t, openCatalogPolling(t, b.catalogURI, time.Hour), storage.Options{})
	}
	a, c := replica(), replica()
	b.register(t)
	// Past the floor between two checks of an empty cache.
	time.Sleep(2 * catalog.EmptyRecheck)
	q := storage.QueueRef{Project: "p", Name: "first"}
	if _, err := a.Queues().Create(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}, {TTL: time.Hour, Body: json.RawMessage(`2`)}}); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10})
	if err != nil || len(cl.Messages) != 2 {
		t.Fatalf("claim through the other replica: %d messages, %v; want the 2 posted", len(cl.Messages), err)
	}
	if pool, err := c.Catalog().Locate(ctx, q); err != nil || pool != "redis1" {
		t.Fatalf("queue placed in %q (%v), want redis1", pool, err)
	}
}

// TestNewPoolReachesReplicasBeforeTheirPoll: a pool registered after the
// replicas loaded their caches (they would not poll again for an hour), a
// queue placed in it through one replica by a flavor of that pool alone,
// then every call on the queue through the other. The other replica finds
// the placement in the catalog but not the pool in its cache; answering
// 503 until its next poll would fail clients of a queue that works.
func TestNewPoolReachesReplicasBeforeTheirPoll(t *testing.T) {
	b := startBackends(t, 2, false, testutil.RedisOptions{})
	ctx := context.Background()
	admin := openCatalog(t, b.catalogURI)
	if _, err := admin.PutPool(ctx, catalog.Pool{Name: "old", URI: b.redis[0].URL, Weight: 100}, false); err != nil {
		t.Fatal(err)
	}
	replica := func() *pooling.Driver {
		return openPooledOn(t, openCatalogPolling(t, b.catalogURI, time.Hour), storage.Options{})
	}
	a, c := replica(), replica()
	if _, err := admin.PutPool(ctx, catalog.Pool{Name: "new", URI: b.redis[1].URL, Weight: 100}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutFlavor(ctx, catalog.Flavor{Name: "fresh", Pools: []string{"new"}}); err != nil {
		t.Fatal(err)
	}
	q := storage.QueueRef{Project: "p", Name: "late"}
	if _, err := a.Queues().Create(ctx, q, storage.Metadata{"_flavor": "fresh"}); err != nil {
		t.Fatal(err)
	}
	if pool, err := c.Catalog().Locate(ctx, q); err != nil || pool != "new" {
		t.Fatalf("queue placed in %q (%v), want new", pool, err)
	}
	if _, err := c.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); err != nil {
		t.Fatalf("post through the replica that has not seen the pool: %v", err)
	}
	msgs, _, err := c.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("list through the replica that has not seen the pool: %d messages, %v; want 1", len(msgs), err)
	}
}
