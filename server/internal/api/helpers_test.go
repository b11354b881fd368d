package api

import (
	"context"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	_ "sluice.dev/server/internal/storage/memory"
	_ "sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

const testClient = "3381af92-2b9e-11e3-b191-71861300734c"

func refOf(project, name string) storage.QueueRef {
	return storage.QueueRef{Project: project, Name: name}
}

// newTestServer builds a server over a fresh memory driver; edit may change
// the options first.
func newTestServer(tb testing.TB, edit func(*config.Options)) *Server {
	tb.Helper()
	opts := config.Defaults()
	opts.AccessLog = false
	opts.DrainDelay = 0
	if edit != nil {
		edit(&opts)
	}
	if err := opts.Validate(); err != nil {
		tb.Fatal(err)
	}
	drv, err := storage.Open(context.Background(), opts.Store, storage.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { drv.Close() })
	return New(opts, drv, nil, nil)
}

// forEachStore runs an API test over the memory driver and over the Redis
// driver on a real redis-server started for it (which fails under CI=true
// when redis-server is missing, and skips otherwise).
func forEachStore(t *testing.T, f func(t *testing.T, store func(*config.Options))) {
	t.Run("memory", func(t *testing.T) { f(t, nil) })
	t.Run("redis", func(t *testing.T) {
		r := testutil.StartRedis(t, testutil.RedisOptions{})
		f(t, func(o *config.Options) { o.Store = r.URL })
	})
}
