// Package profiling serves Go's runtime profiles (net/http/pprof) on a
// listener of their own, for make bench-profile and for operators chasing
// CPU or memory on a live replica. It is off unless --pprof-addr names a
// loopback address (config.Validate refuses any other).
package profiling

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Handler is the pprof index, profile, trace and symbol endpoints under
// /debug/pprof/, on a mux of its own: importing net/http/pprof for its side
// effect would put them on http.DefaultServeMux.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve listens on addr and serves Handler until ctx is done. It returns
// once the listener is bound, so a bad address fails start-up instead of
// being logged later; the returned function waits for the server to stop.
func Serve(ctx context.Context, addr string, log *slog.Logger) (wait func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "error", err.Error())
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close() // profiles in progress are not worth a drain
	}()
	log.Info("serving pprof", "addr", ln.Addr().String())
	return func() { <-done }, nil
}
