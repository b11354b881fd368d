package api

import (
	"net/http"
	"runtime/debug"
	"strings"
)

var (
	errNoRoute  = &apiError{http.StatusNotFound, "404 Not Found", ""}
	errInternal = &apiError{http.StatusInternalServerError, "Internal server error",
		"The request could not be completed."}
)

// route hands the request to the mux, except what the mux would answer
// itself: a path that is not clean ("..", "//", "/./") would get a 307
// redirect that makes clients replay the method, body included, on another
// resource (/v2/queues/a/../b is queue b). Falcon, which Zaqar runs on,
// does not rewrite paths; they match no route there, and get its 404 here.
// A panic in a handler becomes a 500 with a Zaqar body instead of a
// dropped connection.
func (s *Server) route(w *respWriter, r *http.Request) {
	if p := r.URL.EscapedPath(); !cleanPath(p) {
		writeErr(w, errNoRoute, 0)
		return
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		s.log.Error("handler panic", "panic", v, "path", r.URL.Path, "request_id", w.call.RequestID,
			"stack", string(debug.Stack()))
		if !w.wrote {
			writeErr(w, errInternal, 0)
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// cleanPath reports whether p is what ServeMux serves without a redirect:
// absolute, no empty, "." or ".." segments (a trailing slash is fine).
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(p, "//")
}
