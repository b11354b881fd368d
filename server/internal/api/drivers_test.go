package api

import (
	"testing"

	"sluice.dev/server/internal/config"
	_ "sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// forEveryDriver runs an API test over each storage driver a queue can live
// on: memory, Redis, MongoDB (FerretDB) and the pooled driver (a Redis
// catalog routing the queue to a Redis pool). Each dependency is a real
// process; a missing one fails under CI=true and skips otherwise.
func forEveryDriver(t *testing.T, f func(t *testing.T, ts *testServer)) {
	t.Run("memory", func(t *testing.T) { f(t, startServer(t, nil)) })
	t.Run("redis", func(t *testing.T) {
		r := testutil.StartRedis(t, testutil.RedisOptions{})
		f(t, startServer(t, func(o *config.Options) { o.Store = r.URL }))
	})
	t.Run("mongodb", func(t *testing.T) {
		fdb := testutil.StartFerretDB(t)
		f(t, startServer(t, func(o *config.Options) { o.Store = fdb.URI("sluice_api") }))
	})
	t.Run("pooled", func(t *testing.T) {
		mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
		pool := testutil.StartRedis(t, testutil.RedisOptions{})
		ts := startPooledServer(t, mgmt.URL)
		ts.must(201, "PUT", "/v2/pools/p1", std("X-Roles", "admin"), `{"weight":100,"uri":"`+pool.URL+`"}`)
		f(t, ts)
	})
}
