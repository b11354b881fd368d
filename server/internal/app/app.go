package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/metrics"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/instrument"
)

// Extension mounts extra routes on a server (the admin API for pools and
// flavors) once storage is open. It may type-assert s.Driver().
type Extension func(s *Server) error

var (
	extMu      sync.Mutex
	extensions []Extension
)

// Extend registers an extension that Run applies to every server it builds;
// packages call it from init.
func Extend(e Extension) {
	extMu.Lock()
	extensions = append(extensions, e)
	extMu.Unlock()
}

// Ready is told the bound address once the server accepts connections.
type Ready func(addr net.Addr)

// Run opens storage, serves until ctx is done, then drains: health answers
// 503 for the drain delay, the listener closes, and in-flight requests get
// up to the shutdown timeout to finish.
func Run(ctx context.Context, opts config.Options, log *slog.Logger, ready Ready) error {
	m := metrics.New()
	var drv storage.Driver
	err := openWithRetry(ctx, log, "open store "+config.RedactURI(opts.Store), opts.StartTimeout, func(ctx context.Context) (err error) {
		drv, err = storage.Open(ctx, opts.Store, storage.Options{Events: m})
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
	s := New(opts, timed, log, m)
	s.raw = drv
	extMu.Lock()
	exts := append([]Extension(nil), extensions...)
	extMu.Unlock()
	for _, e := range exts {
		if err := e(s); err != nil {
			return err
		}
	}
	// After the extensions: with pooling on, depth and reachability are
	// scraped from the routed driver, which spans every pool.
	if opts.Metrics {
		m.WatchStorage(s.drv, opts.StorageTimeout)
		m.WatchDeliveries(s.drv.Deliveries(), opts.StorageTimeout)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return err
	}
	if ln, err = s.listenTLS(ln); err != nil {
		return err
	}
	stopEngine, err := s.startDeliveries(ctx)
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

// Serve answers on ln until ctx is done, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready Ready) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(zaqarErrorsListener{ln}) }()
	s.log.Info("listening", "addr", ln.Addr().String(), "store", config.RedactURI(s.opts.Store))
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.SetDraining(true)
	s.log.Info("draining", "delay", s.opts.DrainDelay.String())
	time.Sleep(s.opts.DrainDelay)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown timeout: closing remaining connections")
		srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	s.log.Info("stopped")
	return err
}
