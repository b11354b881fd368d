package api

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The lean HTTP/1.1 loop. At saturation a third of the server's CPU per
// request went to net/http's way of serving it (a Request and its header
// map built from scratch, the response header cloned and escaped, a
// background-read goroutine started and stopped with one more read system
// call, four read deadlines set and reset). Most
// requests are the same few shapes from well-behaved clients on keep-alive
// connections, so each connection starts here: a request whose head is a
// strict subset of HTTP/1.1 (leanConn.parse) is served by the same
// ServeHTTP on a Request and header map reused for the connection's life,
// and answered with one write. The first request that is anything else
// (a byte outside the subset, Transfer-Encoding, Expect, Connection other
// than keep-alive, HTTP/1.0, a head over the buffer), or any request while
// the server drains, hands the connection to net/http with the bytes read
// so far, and net/http serves it from then on. So every request the lean
// loop accepts is one net/http parses the same way (TestLeanParseAgrees
// and FuzzLeanParse check it), and whatever net/http decides about the rest (its 400s,
// 431s, 100-continue, chunked bodies, the drain's close) it still decides.
// docs/benchmarks.md ("The lean HTTP/1.1 loop") has the measurement that
// justified writing it by hand.

// leanBufSize is a connection's read buffer, net/http's size: it bounds a
// request head the lean loop reads (a longer head is handed to net/http,
// where MaxHeaderBytes applies), and holds a 1 KiB post whole.
const leanBufSize = 4 << 10

// leanMaxBodyDiscard is how much of a body a handler left unread is read
// and dropped to keep the connection (net/http's maxPostHandlerReadBytes).
const leanMaxBodyDiscard = 256 << 10

// leanCopyMax is the largest answer body copied behind its head for one
// write; a larger one is written from where the handler left it.
const leanCopyMax = 16 << 10

// leanConns tracks the connections the lean loop holds, for shutdown.
type leanConns struct {
	mu       sync.Mutex
	conns    map[*leanConn]struct{}
	closing  atomic.Bool
	done     chan struct{} // closed when closing and conns is empty
	doneOnce sync.Once
}

func newLeanConns() *leanConns {
	return &leanConns{conns: map[*leanConn]struct{}{}, done: make(chan struct{})}
}

func (l *leanConns) add(c *leanConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing.Load() {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *leanConns) remove(c *leanConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
	l.doneIfEmpty()
}

// doneIfEmpty closes done once closing and no connection is left; l.mu is
// held.
func (l *leanConns) doneIfEmpty() {
	if l.closing.Load() && len(l.conns) == 0 {
		l.doneOnce.Do(func() { close(l.done) })
	}
}

// shutdown closes the idle connections and makes the others close after
// their answer; done is closed once none is left.
func (l *leanConns) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing.Store(true)
	for c := range l.conns {
		if c.idle.Load() {
			c.raw.Close()
		}
	}
	l.doneIfEmpty()
}

// closeAll cuts every connection still held (the shutdown timeout passed).
func (l *leanConns) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.raw.Close()
	}
}

func (l *leanConns) isClosing() bool { return l.closing.Load() }

// leanConn is one connection in the lean loop.
type leanConn struct {
	s    *Server
	raw  net.Conn // what this loop reads and writes
	give func(net.Conn) bool
	set  *leanConns
	idle atomic.Bool // waiting for a request's first byte

	buf      []byte // read buffer; buf[r:w] is read and not yet consumed
	r, w     int
	deadline time.Time // the read deadline last set

	req    http.Request
	url    url.URL
	header http.Header // the request's; spare is the last one's, reused
	spare  http.Header
	body   leanBody
	resp   leanWriter
	out    []byte
	remote string
	// The strings of the last request, reused while they repeat.
	pathStr, queryStr, targetStr, hostStr string
}

// serveLean runs the lean loop on c. give hands the connection to
// net/http (false: net/http is no longer accepting; the connection is
// closed). It returns when the connection is closed or handed over.
func (s *Server) serveLean(raw net.Conn, set *leanConns, give func(net.Conn) bool, closed func()) {
	lc := &leanConn{s: s, raw: raw, give: give, set: set, buf: make([]byte, leanBufSize),
		header: make(http.Header, 8), remote: raw.RemoteAddr().String()}
	lc.resp.h = make(http.Header, 8)
	if !set.add(lc) {
		raw.Close()
		closed()
		return
	}
	handed := lc.loop()
	set.remove(lc)
	if !handed {
		raw.Close()
		closed()
	}
}

// loop serves requests until the connection ends (false) or is handed to
// net/http (true).
func (lc *leanConn) loop() bool {
	for {
		if lc.r == lc.w {
			lc.r, lc.w = 0, 0
		}
		start := time.Time{}
		headEnd := -1
		for {
			if i := bytes.Index(lc.buf[lc.r:lc.w], crlfcrlf); i >= 0 {
				headEnd = lc.r + i + 4
				break
			}
			if lc.w-lc.r >= len(lc.buf) {
				return lc.handOver() // a head larger than the buffer
			}
			if lc.w == len(lc.buf) { // move the partial head to the front
				lc.w = copy(lc.buf, lc.buf[lc.r:lc.w])
				lc.r = 0
			}
			if lc.r == lc.w {
				lc.idle.Store(true)
				if lc.set.isClosing() {
					return false
				}
				lc.extendDeadline(lc.idleTimeout())
			} else {
				if start.IsZero() {
					start = time.Now()
				}
				lc.setDeadline(start, lc.headerTimeout())
			}
			n, err := lc.raw.Read(lc.buf[lc.w:])
			lc.idle.Store(false)
			lc.w += n
			if err != nil && n == 0 {
				// The client closed or a timeout passed; net/http too drops
				// the connection unanswered, part of a head read or not.
				return false
			}
		}
		if lc.s.draining.Load() || lc.set.isClosing() {
			return lc.handOver()
		}
		if start.IsZero() {
			start = time.Now()
		}
		if !lc.parse(lc.buf[lc.r:headEnd]) {
			return lc.handOver()
		}
		lc.r = headEnd
		if !lc.serve(start) {
			return false
		}
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// headerTimeout and idleTimeout fall back to ReadTimeout as net/http's do.
func (lc *leanConn) headerTimeout() time.Duration {
	if d := lc.s.opts.ReadHeaderTimeout; d > 0 {
		return d
	}
	return lc.s.opts.ReadTimeout
}

func (lc *leanConn) idleTimeout() time.Duration {
	if d := lc.s.opts.IdleTimeout; d > 0 {
		return d
	}
	return lc.s.opts.ReadTimeout
}

// extendDeadline sets the read deadline to about d from now, touching the
// timer only when the deadline set is less than half of d away, so a busy
// connection does not pay a timer update per request: the connection waits
// between d/2 and d.
func (lc *leanConn) extendDeadline(d time.Duration) {
	if d <= 0 {
		if !lc.deadline.IsZero() {
			lc.deadline = time.Time{}
			lc.raw.SetReadDeadline(lc.deadline)
		}
		return
	}
	now := time.Now()
	if !lc.deadline.IsZero() && lc.deadline.Sub(now) >= d/2 {
		return
	}
	lc.deadline = now.Add(d)
	lc.raw.SetReadDeadline(lc.deadline)
}

// setDeadline sets the read deadline to start+d exactly (no deadline for
// d <= 0), as net/http bounds a request's head and body.
func (lc *leanConn) setDeadline(start time.Time, d time.Duration) {
	var t time.Time
	if d > 0 {
		t = start.Add(d)
	}
	if !t.Equal(lc.deadline) {
		lc.deadline = t
		lc.raw.SetReadDeadline(t)
	}
}

// handOver gives the connection, with what was read of it and not
// consumed, to net/http.
func (lc *leanConn) handOver() bool {
	var pending []byte
	if lc.r < lc.w {
		pending = bytes.Clone(lc.buf[lc.r:lc.w])
	}
	if !lc.deadline.IsZero() {
		lc.raw.SetReadDeadline(time.Time{})
	}
	return lc.give(&prefixConn{Conn: lc.raw, pending: pending})
}

// serve answers the parsed request; false ends the connection.
func (lc *leanConn) serve(start time.Time) bool {
	lc.body.start = start
	lc.resp.reset()
	if !lc.handle() {
		return false
	}
	keep := lc.finishBody()
	if lc.set.isClosing() {
		keep = false
	}
	closeAfter := !keep || headerHasToken(lc.resp.h["Connection"], "close")
	if closeAfter && lc.resp.h["Connection"] == nil {
		lc.resp.h["Connection"] = connClose
	}
	lc.out = lc.resp.appendHead(lc.out[:0])
	var err error
	if body := lc.resp.body; len(body) <= leanCopyMax {
		lc.out = append(lc.out, body...)
		_, err = lc.raw.Write(lc.out)
	} else {
		// A large answer (a listing of big messages) goes out as it is,
		// head and body in one writev, rather than copied.
		bufs := net.Buffers{lc.out, body}
		_, err = bufs.WriteTo(lc.raw)
	}
	// One huge answer does not pin its buffers for the connection's life.
	if cap(lc.out) > maxPooledBuf {
		lc.out = nil
	}
	if cap(lc.resp.body) > maxPooledBuf {
		lc.resp.body = nil
	}
	if err != nil {
		return false
	}
	if closeAfter {
		lingerClose(lc.raw)
		return false
	}
	return true
}

var connClose = []string{"close"}

// handle runs ServeHTTP; false: it panicked past the route's own recover
// (http.ErrAbortHandler), and the connection is dropped unanswered, as
// net/http drops it.
func (lc *leanConn) handle() (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				lc.s.log.Error("handler panic", "panic", v, "path", lc.req.URL.Path)
			}
			ok = false
		}
	}()
	lc.s.ServeHTTP(&lc.resp, &lc.req)
	return true
}

// lingerClose half-closes and waits a moment before the close, as net/http
// does, so the client reads the answer before any reset.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	time.Sleep(leanLinger)
}

// leanLinger is net/http's rstAvoidanceDelay.
var leanLinger = 500 * time.Millisecond

// finishBody skips what the handler left of the body; false: it could not
// (too much left, or the client stopped), and the connection must close.
func (lc *leanConn) finishBody() bool {
	left := lc.body.left
	if left == 0 {
		return !lc.body.failed
	}
	if buffered := int64(lc.w - lc.r); left <= buffered {
		lc.r += int(left)
		lc.body.left = 0
		return true
	}
	if left > leanMaxBodyDiscard {
		return false
	}
	_, err := io.Copy(io.Discard, &lc.body)
	return err == nil && lc.body.left == 0
}

// leanBody reads a Content-Length body from the buffer, then the
// connection, within the request's read timeout.
type leanBody struct {
	lc     *leanConn
	left   int64
	start  time.Time
	failed bool
}

func (b *leanBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	lc := b.lc
	var n int
	if lc.r < lc.w {
		n = copy(p, lc.buf[lc.r:lc.w])
		lc.r += n
	} else {
		lc.setDeadline(b.start, lc.s.opts.ReadTimeout)
		var err error
		n, err = lc.raw.Read(p)
		if n == 0 && err != nil {
			b.failed = true
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	b.left -= int64(n)
	if b.left == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (b *leanBody) Close() error { return nil }

// prefixConn is a connection handed to net/http: what the lean loop read
// and did not consume comes first.
type prefixConn struct {
	net.Conn
	pending []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite keeps net/http's graceful close after an error answer.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

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
		for len(v) > 0 {
			var part string
			if i := indexByteString(v, ','); i >= 0 {
				part, v = v[:i], v[i+1:]
			} else {
				part, v = v, ""
			}
			if equalFoldTrim(part, token) {
				return true
			}
		}
	}
	return false
}

func indexByteString(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func equalFoldTrim(s, t string) bool {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// leanMethods are the methods the lean loop serves (HEAD, whose answers
// have no body, and the rest go to net/http).
var leanMethods = [...]string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// Bytes a lean request's path may hold: those url.URL.EscapedPath leaves
// as they are, so Path is the target's path as written and RawPath empty.
// A query may hold any visible ASCII but '#'.
var leanPathByte, leanQueryByte, leanNameByte, leanValueByte, leanHostByte = func() (p, q, n, v, h [256]bool) {
	for c := 0; c < 256; c++ {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		p[c] = alnum || bytes.IndexByte([]byte("-._~/$&+,:;=@"), byte(c)) >= 0
		q[c] = c > 0x20 && c < 0x7f && c != '#'
		n[c] = alnum || c == '-'
		v[c] = c >= 0x20 && c < 0x7f || c == '\t'
		h[c] = alnum || bytes.IndexByte([]byte("-.:[]"), byte(c)) >= 0
	}
	return
}()

// parse reads a request head (through its blank line) into lc.req, or
// returns false for one outside the subset the lean loop serves.
func (lc *leanConn) parse(head []byte) bool {
	if max := lc.s.opts.MaxHeaderBytes; max > 0 && len(head) > max {
		return false
	}
	line, rest, ok := bytes.Cut(head, crlf)
	if !ok {
		return false
	}
	method := ""
	for _, m := range leanMethods {
		if len(line) > len(m) && string(line[:len(m)]) == m && line[len(m)] == ' ' {
			method = m
			break
		}
	}
	if method == "" {
		return false
	}
	line = line[len(method)+1:]
	const proto = " HTTP/1.1"
	if len(line) <= len(proto) || string(line[len(line)-len(proto):]) != proto {
		return false
	}
	target := line[:len(line)-len(proto)]
	if target[0] != '/' {
		return false
	}
	pathEnd := len(target)
	for i, c := range target {
		if c == '?' {
			pathEnd = i
			break
		}
		if !leanPathByte[c] {
			return false
		}
	}
	if pathEnd == len(target)-1 {
		return false // "?" and nothing after: url.URL's ForceQuery
	}
	for _, c := range target[pathEnd:] {
		if !leanQueryByte[c] {
			return false
		}
	}

	old := lc.header
	h := lc.spare
	if h == nil {
		h = make(http.Header, 8)
	}
	clear(h)
	host := ""
	var contentLength int64
	haveLength := false
	for len(rest) > 2 {
		line, rest, ok = bytes.Cut(rest, crlf)
		if !ok {
			return false
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		name := line[:colon]
		for _, c := range name {
			if !leanNameByte[c] {
				return false
			}
		}
		v := line[colon+1:]
		for _, c := range v {
			if !leanValueByte[c] {
				return false
			}
		}
		v = bytes.Trim(v, " \t")
		key := canonicalKey(name)
		switch key {
		case "Host":
			if host != "" || len(v) == 0 {
				return false
			}
			for _, c := range v {
				if !leanHostByte[c] {
					return false
				}
			}
			host = lc.hostString(v)
			continue
		case "Content-Length":
			if haveLength || len(v) == 0 || len(v) > 15 {
				return false
			}
			for _, c := range v {
				if c < '0' || c > '9' {
					return false
				}
			}
			n, _ := strconv.ParseInt(string(v), 10, 64)
			contentLength, haveLength = n, true
		case "Connection":
			if !equalFoldTrim(string(v), "keep-alive") {
				return false
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer", "Pragma", "Http2-Settings":
			return false
		case "":
			return false
		}
		if prev, ok := h[key]; ok {
			h[key] = append(prev, string(v))
			continue
		}
		if vs := old[key]; len(vs) == 1 && vs[0] == string(v) {
			h[key] = vs // the same value as on the connection's last request
		} else {
			h[key] = []string{string(v)}
		}
	}
	if host == "" || len(rest) != 2 {
		return false
	}
	lc.spare, lc.header = old, h

	lc.url = url.URL{Path: lc.str(&lc.pathStr, target[:pathEnd])}
	if pathEnd < len(target) {
		lc.url.RawQuery = lc.str(&lc.queryStr, target[pathEnd+1:])
	}
	lc.req = http.Request{
		Method:        method,
		URL:           &lc.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: contentLength,
		Host:          host,
		RemoteAddr:    lc.remote,
		RequestURI:    lc.str(&lc.targetStr, target),
	}
	lc.body = leanBody{lc: lc, left: contentLength}
	lc.req.Body = http.NoBody
	if contentLength > 0 {
		lc.req.Body = &lc.body
	}
	return true
}

var crlf = []byte("\r\n")

// str returns b as a string, the one from the last request when the
// bytes are the same (a client sends the same path again and again).
func (lc *leanConn) str(last *string, b []byte) string {
	if *last != string(b) {
		*last = string(b)
	}
	return *last
}

func (lc *leanConn) hostString(b []byte) string { return lc.str(&lc.hostStr, b) }

// canonicalKey is textproto.CanonicalMIMEHeaderKey for a name of letters,
// digits and '-', without allocating for the names requests carry.
func canonicalKey(name []byte) string {
	var buf [64]byte
	if len(name) > len(buf) {
		return ""
	}
	upper := true
	for i, c := range name {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	k := buf[:len(name)]
	if s, ok := commonKeys[string(k)]; ok {
		return s
	}
	return string(k)
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Client-Id", "Connection", "Content-Length", "Content-Type", "Host", "User-Agent", "X-Auth-Token",
		"X-Project-Id", "X-Roles", "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer", "Pragma",
		"Http2-Settings", "Url-Signature", "Url-Expires", "Url-Methods", "Url-Paths"} {
		m[k] = k
	}
	return m
}()
