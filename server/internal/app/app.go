// Package app is sluice-server's process wiring: options in, storage opened
// (with retries while dependencies start), the HTTP server built over it,
// pooling and notification delivery switched on as configured, served until
// the context ends. Everything a process does once is here, in one straight
// line; the api package only answers requests.
package app

import (
	"context"
	"log/slog"
	"net"
	"strings"

	"sluice.dev/server/internal/api"
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/metrics"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/instrument"
	"sluice.dev/server/internal/storage/pooling"
)

// Ready is told the bound address once the server accepts connections.
type Ready func(addr net.Addr)

// Run opens storage, serves until ctx is done, then drains: health answers
// 503 for the drain delay, the listener closes, and in-flight requests get
// up to the shutdown timeout to finish.
func Run(ctx context.Context, opts config.Options, log *slog.Logger, ready Ready) error {
	m := metrics.New()
	// One clock for the drivers (TTLs, claim expiry) and the API (message
	// and claim ages), so the ages shown agree with what the store decides.
	sopts := storage.Options{Events: m, Clock: storage.SystemClock{}}
	var drv storage.Driver
	err := openWithRetry(ctx, log, "open store "+config.RedactURI(opts.Store), opts.StartTimeout, func(ctx context.Context) (err error) {
		drv, err = storage.Open(ctx, opts.Store, sopts)
		return err
	})
	if err != nil {
		return err
	}
	defer drv.Close()
	// Every store call is timed as sluice_storage_op_duration_seconds{driver,op}.
	timed, err := instrument.Wrap(drv, driverName(opts.Store), m.Registry)
	if err != nil {
		return err
	}
	s := api.New(opts, timed, log, m)
	s.SetClock(sopts.Clock)
	routed := storage.Driver(timed)
	if opts.Catalog != "" {
		if routed, err = enablePooling(ctx, s, opts, log, m.Registry); err != nil {
			return err
		}
	}
	// With pooling on, depth and reachability are scraped from the routed
	// driver, which spans every pool.
	if opts.Metrics {
		m.WatchStorage(routed, opts.StorageTimeout)
		m.WatchDeliveries(routed.Deliveries(), opts.StorageTimeout)
		if pd, ok := routed.(*pooling.Driver); ok {
			m.WatchPoolCapacity(pd.Capacities)
		}
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return err
	}
	if ln, err = listenTLS(ln, opts.TLS, log); err != nil {
		return err
	}
	if opts.Metrics && opts.MetricsListen != "" {
		stopMetrics, err := serveMetrics(opts, m, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
	}
	stopEngine, err := s.StartDeliveries(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopEngine()
	return s.Serve(ctx, ln, ready)
}

// driverName is the driver label: the store URI's scheme.
func driverName(uri string) string {
	if i := strings.Index(uri, "://"); i > 0 {
		return uri[:i]
	}
	return uri
}
