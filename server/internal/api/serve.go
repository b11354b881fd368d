package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
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
	// Every connection is accepted here and starts in the lean loop
	// (lean.go), which hands it to net/http at its first request outside
	// the lean subset; without the lean loop, net/http gets it at once.
	hl := newHandoverListener(ln.Addr(), s.m.HandedOver)
	lean := newLeanConns()
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				open.Add(-1)
			}
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(hl) }()
	go func() {
		hl.stop(acceptLoop(ln, func(c net.Conn) {
			open.Add(1)
			lastAccept.Store(time.Now().UnixNano())
			if s.draining.Load() {
				lateAccepts.Add(1)
			}
			if s.opts.LeanHTTP {
				go s.serveLean(c, lean, hl.give, func() { open.Add(-1) })
			} else if !hl.give(c) {
				c.Close()
				open.Add(-1)
			}
		}))
	}()
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
	lean.shutdown()
	err := srv.Shutdown(sctx)
	if err == nil {
		select {
		case <-lean.done:
		case <-sctx.Done():
			err = sctx.Err()
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown timeout: closing remaining connections")
		srv.Close()
		lean.closeAll()
	}
	s.log.Info("stopped")
	return err
}

// acceptLoop accepts connections on ln and gives each to serve, until ln
// fails for good (closed); it returns that error. A temporary failure
// (out of file descriptors) is retried after a pause that doubles up to a
// second, as net/http's own loop does.
func acceptLoop(ln net.Listener, serve func(net.Conn)) error {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		serve(c)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// handoverListener is the listener net/http serves: its connections are
// the ones the accept loop or the lean loop give it.
type handoverListener struct {
	addr       net.Addr
	handedOver func() // counts a connection given
	conns      chan net.Conn
	once       sync.Once
	done       chan struct{}
	err        error
}

func newHandoverListener(addr net.Addr, handedOver func()) *handoverListener {
	return &handoverListener{addr: addr, handedOver: handedOver, conns: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to net/http, wrapped so that net/http's own error answers
// get Zaqar bodies; false once net/http no longer accepts.
func (l *handoverListener) give(c net.Conn) bool {
	select {
	case l.conns <- &zaqarErrorsConn{Conn: c}:
		l.handedOver()
		return true
	case <-l.done:
		return false
	}
}

// stop makes Accept return err (the real listener's).
func (l *handoverListener) stop(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

func (l *handoverListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *handoverListener) Close() error {
	l.stop(net.ErrClosed)
	return nil
}

func (l *handoverListener) Addr() net.Addr { return l.addr }
