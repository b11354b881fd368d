package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/config"
)

// Serve answers on ln until ctx is done, then shuts down gracefully:
//
//  1. drain: for DrainDelay, health answers 503 (load balancers stop
//     sending new connections) and every answer says Connection: close;
//  2. linger: the listener closes, and connections still open stay open
//     until their client ends them, or sends one more request (answered
//     with Connection: close), for most of ShutdownTimeout. A client's
//     idle keep-alive connection closed by the server races the client's
//     next request on it, which then fails with an EOF or a reset
//     although it may not even have been read: a POST that no client can
//     safely retry;
//  3. shutdown: what is still open is closed once idle, and requests in
//     flight get the rest of ShutdownTimeout (at least StorageTimeout,
//     which bounds their storage calls, unless ShutdownTimeout is shorter).
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(net.Addr)) error {
	var open atomic.Int64 // connections accepted and not yet closed
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		},
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

	deadline := time.Now().Add(s.opts.ShutdownTimeout)
	_ = ln.Close() // Serve returns; the connections it accepted carry on
	serr := <-errc
	if serr != nil && !errors.Is(serr, net.ErrClosed) {
		return serr
	}
	reserve := min(s.opts.StorageTimeout, s.opts.ShutdownTimeout/2)
	tick := time.NewTicker(20 * time.Millisecond)
	for open.Load() > 0 && time.Until(deadline) > reserve {
		<-tick.C
	}
	tick.Stop()
	if n := open.Load(); n > 0 {
		s.log.Info("closing connections their clients kept open", "connections", n)
	}
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown timeout: closing remaining connections")
		srv.Close()
	}
	s.log.Info("stopped")
	return err
}
