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
