package app

import (
	"errors"
	"log/slog"
	"net"
	"net/http"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/metrics"
)

// serveMetrics serves /metrics alone on opts.MetricsListen (HTTPS when the
// API is), so that port can be opened to the scraper only. It returns once
// the listener is bound, so a bad address fails start-up; stop closes it.
// The listener outlives the API's drain: a scrape during the drain still
// sees the last requests counted.
func serveMetrics(opts config.Options, m *metrics.Metrics, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", opts.MetricsListen)
	if err != nil {
		return nil, err
	}
	if ln, err = listenTLS(ln, opts.TLS, log); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics listener stopped", "error", err.Error())
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return func() { srv.Close(); <-done }, nil
}
