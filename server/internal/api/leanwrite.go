package api

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The lean loop's answers (lean.go): collected from the handler, then
// encoded as net/http encodes a small one.

// leanWriter collects an answer, written in one piece after the handler.
type leanWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *leanWriter) reset() {
	clear(w.h)
	w.status = 0
	w.body = w.body[:0]
}

func (w *leanWriter) Header() http.Header { return w.h }

func (w *leanWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *leanWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

// appendHead encodes the answer's status line and headers as net/http
// would for a handler that returned before its output filled net/http's
// buffer: the handler's headers, Date, Content-Length (where a body is
// allowed) and a sniffed Content-Type for a body without one.
func (w *leanWriter) appendHead(b []byte) []byte {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	if text := http.StatusText(w.status); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(w.status), 10)
	}
	b = append(b, "\r\n"...)
	allowed := bodyAllowed(w.status)
	if _, typed := w.h["Content-Type"]; allowed && len(w.body) > 0 && !typed {
		w.h["Content-Type"] = []string{http.DetectContentType(w.body)}
	}
	for k, vs := range w.h {
		if !allowed && k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendHeaderValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	if _, dated := w.h["Date"]; !dated {
		b = append(b, "Date: "...)
		b = appendDate(b)
		b = append(b, "\r\n"...)
	}
	if _, sized := w.h["Content-Length"]; allowed && !sized {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// appendHeaderValue writes v as net/http does: newlines become spaces,
// surrounding spaces and tabs are trimmed.
func appendHeaderValue(b []byte, v string) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	start := len(b)
	b = append(b, v...)
	for i := start; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return b
}

// The Date header's text, formatted once a second.
var dateCache atomic.Pointer[dateText]

type dateText struct {
	unix int64
	text []byte
}

func appendDate(b []byte) []byte {
	now := time.Now()
	sec := now.Unix()
	d := dateCache.Load()
	if d == nil || d.unix != sec {
		d = &dateText{unix: sec, text: now.UTC().AppendFormat(nil, http.TimeFormat)}
		dateCache.Store(d)
	}
	return append(b, d.text...)
}

// headerHasToken reports whether a comma-separated header holds token,
// case-insensitively.
func headerHasToken(vs []string, token string) bool {
	for _, v := range vs {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(part, " \t"), token) {
				return true
			}
		}
	}
	return false
}
