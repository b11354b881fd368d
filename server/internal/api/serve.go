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

// lingerQuiet is how long no new connection must come before a draining
// server takes the Service's endpoint removal as done and closes its
// listener. Under load clients reconnect many times a second while the
// proxy still routes here. A shorter drain delay shortens it: without one
// (a single process, a test) nothing routes here that could be waited for.
const lingerQuiet = time.Second

// Serve answers on ln until ctx is done, then shuts down gracefully:
//
//  1. drain: for DrainDelay, health answers 503 (load balancers stop
//     sending new connections) and every answer says Connection: close;
//  2. linger: the listener stays open, and connections stay open until
//     their client ends them, or sends one more request (answered with
//     Connection: close). It ends once no connection is open and none
//     came for lingerQuiet, or after most of ShutdownTimeout. The Service
//     may route new connections here well after the drain delay (endpoint
//     removal reaches a busy node's proxy late), and a closed listener
//     refuses them. A client's idle keep-alive connection closed by the
//     server races the client's next request on it, which then fails with
//     an EOF or a reset although it may not even have been read. Either
//     way a POST fails that no client can safely retry;
//  3. shutdown: the listener closes, what is still open is closed once
//     idle, and requests in flight get the rest of ShutdownTimeout (at
//     least StorageTimeout, which bounds their storage calls, unless
//     ShutdownTimeout is shorter).
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(net.Addr)) error {
	var open atomic.Int64        // connections accepted and not yet closed
	var lastAccept atomic.Int64  // when the newest connection came, in Unix ns
	var lateAccepts atomic.Int64 // connections accepted after SIGTERM, for the log
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
				lastAccept.Store(time.Now().UnixNano())
				if s.draining.Load() {
					lateAccepts.Add(1)
				}
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
	stopping := time.Now()
	s.log.Info("draining", "delay", s.opts.DrainDelay.String())
	time.Sleep(s.opts.DrainDelay)

	deadline := time.Now().Add(s.opts.ShutdownTimeout)
	reserve := min(s.opts.StorageTimeout, s.opts.ShutdownTimeout/2)
	wait := min(lingerQuiet, s.opts.DrainDelay)
	tick := time.NewTicker(20 * time.Millisecond)
	for time.Until(deadline) > reserve {
		quiet := time.Since(time.Unix(0, lastAccept.Load())) >= wait
		if open.Load() == 0 && quiet {
			break
		}
		<-tick.C
	}
	tick.Stop()
	// Serve returns on the listener's close; the connections it accepted
	// carry on until Shutdown below.
	_ = ln.Close()
	serr := <-errc
	if serr != nil && !errors.Is(serr, net.ErrClosed) {
		return serr
	}
	late := "none"
	if n := lateAccepts.Load(); n > 0 {
		late = time.Unix(0, lastAccept.Load()).Sub(stopping).Round(time.Millisecond).String()
	}
	s.log.Info("listener closed", "accepted_after_sigterm", lateAccepts.Load(), "last_accepted_after", late,
		"open", open.Load())
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
