package api

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/sockio"
)

// The lean HTTP/1.1 loop. At saturation a third of the server's CPU per
// request went to net/http's way of serving it (a Request and its header
// map built from scratch, the response header cloned and escaped, a
// background-read goroutine started and stopped with one more read system
// call, four read deadlines set and reset). Most
// requests are the same few shapes from well-behaved clients on keep-alive
// connections, so each connection starts here: a request whose head is a
// strict subset of HTTP/1.1 is served by the same
// ServeHTTP on a Request and header map reused for the connection's life,
// and answered with one write. The first request that is anything else
// (a byte outside the subset, Transfer-Encoding, Expect, Connection other
// than keep-alive, HTTP/1.0, a head over the buffer), or any request while
// the server drains, hands the connection to net/http with the bytes read
// so far, and net/http serves it from then on. So every request the lean
// loop accepts is one net/http parses the same way (TestLeanParseAgrees
// and FuzzLeanParse check it), and whatever net/http decides about the
// rest (its 400s, 431s, 100-continue, chunked bodies, the drain's close)
// it still decides. The parser is in leanparse.go, the answers' encoding
// in leanwrite.go.
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
	s   *Server
	raw net.Conn // what this loop reads and writes
	// sock reads and writes raw's socket directly (sockio: the scheduler's
	// monitor stays asleep); raw itself where it is no socket (TLS).
	sock io.ReadWriter
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
	lc.sock = raw
	if sc, ok := sockio.New(raw); ok {
		lc.sock = sc
	}
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
			n, err := lc.sock.Read(lc.buf[lc.w:])
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
		_, err = lc.sock.Write(lc.out)
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
		n, err = lc.sock.Read(p)
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
