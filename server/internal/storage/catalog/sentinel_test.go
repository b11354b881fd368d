package catalog_test

import (
	"context"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	_ "sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

// TestSentinelURIs: the catalog lives behind Sentinel
// (redis://host:port?master=name), and a pool registered in Sentinel form
// passes the real reachability probe.
func TestSentinelURIs(t *testing.T) {
	ctx := context.Background()
	master := testutil.StartRedis(t, testutil.RedisOptions{})
	sentinel := testutil.StartSentinel(t, master, "mymaster")
	st, err := catalog.OpenStore(ctx, sentinel.URL)
	if err != nil {
		t.Fatalf("catalog behind Sentinel %s: %v", sentinel.URL, err)
	}
	c, err := catalog.New(ctx, st, catalog.Options{}) // default probe: opens and pings
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.PutPool(ctx, catalog.Pool{Name: "sentinel", URI: sentinel.URL, Weight: 1}, false); err != nil {
		t.Fatalf("register Sentinel pool: %v", err)
	}
	q := storage.QueueRef{Project: "p", Name: "q"}
	if p, err := c.Assign(ctx, q, ""); err != nil || p != "sentinel" {
		t.Fatalf("assign: %q %v", p, err)
	}
	if p, _ := st.Lookup(ctx, q); p != "sentinel" {
		t.Fatalf("placement read back through Sentinel: %q", p)
	}
}
