package pooling_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/instrument"
	_ "sluice.dev/server/internal/storage/memory"
	_ "sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/storage/pooling"
	_ "sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

// backends is a management store and the pools registered in it.
type backends struct {
	catalogURI string
	redis      []*testutil.Redis
	ferret     *testutil.FerretDB
}

// startBackends starts nRedis redis-servers and, when withFerret, one
// FerretDB, plus a redis-server of its own for the catalog.
func startBackends(t *testing.T, nRedis int, withFerret bool, opts testutil.RedisOptions) *backends {
	t.Helper()
	b := &backends{}
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	b.catalogURI = mgmt.URL
	for i := 0; i < nRedis; i++ {
		b.redis = append(b.redis, testutil.StartRedis(t, opts))
	}
	if withFerret {
		b.ferret = testutil.StartFerretDB(t)
	}
	return b
}

// register puts every backend in the catalog as a pool of weight 100.
func (b *backends) register(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cat := openCatalog(t, b.catalogURI)
	for i, r := range b.redis {
		if _, err := cat.PutPool(ctx, catalog.Pool{Name: fmt.Sprintf("redis%d", i+1), URI: r.URL, Weight: 100}, false); err != nil {
			t.Fatalf("register redis pool: %v", err)
		}
	}
	if b.ferret != nil {
		if _, err := cat.PutPool(ctx, catalog.Pool{Name: "ferret", URI: b.ferret.URI("pool"), Weight: 100}, false); err != nil {
			t.Fatalf("register FerretDB pool: %v", err)
		}
	}
}

// openCatalog opens a catalog client (what one server process holds).
func openCatalog(t testing.TB, uri string) *catalog.Catalog {
	t.Helper()
	return openCatalogPolling(t, uri, 100*time.Millisecond)
}

// openCatalogPolling is openCatalog polling the catalog every refresh.
func openCatalogPolling(t testing.TB, uri string, refresh time.Duration) *catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	st, err := catalog.OpenStore(ctx, uri)
	if err != nil {
		t.Fatalf("open catalog store: %v", err)
	}
	cat, err := catalog.New(ctx, st, catalog.Options{Refresh: refresh})
	if err != nil {
		t.Fatalf("load catalog: %v", err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// openPooled returns a pooled driver (memory default store) on its own
// catalog client.
func openPooled(t testing.TB, catalogURI string, opts storage.Options) *pooling.Driver {
	t.Helper()
	return openPooledOn(t, openCatalog(t, catalogURI), opts)
}

// openPooledOn is openPooled on a given catalog client.
func openPooledOn(t testing.TB, cat *catalog.Catalog, opts storage.Options) *pooling.Driver {
	t.Helper()
	fallback, err := storage.Open(context.Background(), "memory", opts)
	if err != nil {
		t.Fatal(err)
	}
	// Pools are timed as the server times them, so every case also runs
	// through the wrapper (which must keep the optional interfaces).
	reg := prometheus.NewRegistry()
	d := pooling.New(cat, fallback, opts, nil, func(name string, d storage.Driver) (storage.Driver, error) {
		return instrument.Wrap(d, name, reg)
	})
	t.Cleanup(func() { d.Close(); fallback.Close() })
	return d
}
