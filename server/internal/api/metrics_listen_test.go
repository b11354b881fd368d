package api

import (
	"context"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/metrics"
	"sluice.dev/server/internal/storage"
)

// TestMetricsRouteFollowsMetricsListen: the API port serves /metrics only
// when no listener of its own does (app.Run serves that one); otherwise
// /metrics is an unknown path, through the lean loop and net/http alike.
func TestMetricsRouteFollowsMetricsListen(t *testing.T) {
	for _, c := range []struct {
		name, metricsListen string
		lean                bool
		want                int
	}{
		{"on the API port", "", true, 200},
		{"own port, lean", "127.0.0.1:9464", true, 404},
		{"own port, net/http", "127.0.0.1:9464", false, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := config.Defaults()
			opts.AccessLog, opts.DrainDelay, opts.LeanHTTP = false, 0, c.lean
			opts.MetricsListen = c.metricsListen
			if err := opts.Validate(); err != nil {
				t.Fatal(err)
			}
			drv, err := storage.Open(context.Background(), opts.Store, storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { drv.Close() })
			ts := serve(t, New(opts, drv, nil, metrics.New()))
			got := ts.must(c.want, "GET", "/metrics", hdr{}, "")
			if c.want == 404 {
				unknown := ts.must(404, "GET", "/no-such-path", hdr{}, "")
				if got.body != unknown.body || got.header.Get("Content-Type") != unknown.header.Get("Content-Type") {
					t.Errorf("/metrics answers %q (%s), an unknown path %q (%s)", got.body,
						got.header.Get("Content-Type"), unknown.body, unknown.header.Get("Content-Type"))
				}
			}
		})
	}
}
