package redis_test

import (
	"context"
	"net/url"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// server is one redis-server for the whole package run, started on first
// use; every case scopes its data by random project names.
var server struct {
	r   *testutil.Redis
	url string
}

func TestMain(m *testing.M) { testutil.RunWithRedis(m, &server.r) }

func open(t testing.TB, clock storage.Clock) storage.Driver { return openURI(t, clock, "") }

// openURI opens database db ("": the URL's) of the package's redis-server.
func openURI(t testing.TB, clock storage.Clock, db string) storage.Driver {
	t.Helper()
	if server.r == nil {
		testutil.NoRedis(t)
	}
	u, _ := url.Parse(server.r.URL)
	if db != "" {
		u.Path = "/" + db
	}
	d, err := redis.Open(context.Background(), u, storagetest.Options(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) { storagetest.Run(t, open) }

func BenchmarkDriver(b *testing.B) { storagetest.Bench(b, open) }
