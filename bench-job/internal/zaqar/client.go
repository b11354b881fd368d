// Package zaqar is a small, allocation-conscious client for the Zaqar v2
// messaging API: just the calls a load generator makes, over a keep-alive
// connection pool sized to the number of workers.
//
// The client never retries. A failed request is the caller's to count, and
// a Retry-After header on it is read (Session.RetryAfter) and recorded,
// not waited out: sluice-bench measures how long the service refuses, and
// a worker that slept for the delay would measure its own sleep instead
// (its next request usually goes to another queue, often on another shard).
package zaqar

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Options configure a Client.
type Options struct {
	BaseURL   string // e.g. http://127.0.0.1:8888
	ProjectID string // X-Project-ID (noauth deployments require it)
	Token     string // sent as X-Auth-Token and Authorization: Bearer
	// TokenFile, instead of Token: a file holding the token, re-read every
	// 30 s, so a projected ServiceAccount token that the kubelet
	// rotates keeps working through a long run.
	TokenFile string
	Conns     int           // keep-alive pool size; one per concurrent worker
	Timeout   time.Duration // whole-request timeout
	// ErrorLog receives the first LoggedErrors failures that got no HTTP
	// status at all (connection refused, reset, EOF, timeout), in full:
	// the summary counts them by kind only, and an unexpected kind needs
	// its method, path and error text to be explained. nil logs none.
	ErrorLog io.Writer
}

// LoggedErrors bounds what ErrorLog receives per client, so a dead target
// cannot flood the log.
const LoggedErrors = 10

// Client holds the shared transport. It is safe for concurrent use; each
// worker talks through its own Session so buffers are reused without locks.
type Client struct {
	base   *url.URL
	tr     *http.Transport
	opts   Options
	start  time.Time
	logged atomic.Int64 // transport errors seen, logged up to LoggedErrors
	token  atomic.Pointer[string]
	stop   chan struct{}
}

// tokenRefresh is how often a TokenFile is read again; the kubelet renews a
// projected token when 80 % of its lifetime (at least 10 minutes) is gone.
var tokenRefresh = 30 * time.Second

// New validates the base URL and builds a transport whose idle pool holds
// one connection per worker, so steady-state load never re-dials.
func New(o Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, &url.Error{Op: "parse", URL: o.BaseURL, Err: errBadURL}
	}
	if o.Conns < 1 {
		o.Conns = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	tr := &http.Transport{
		Proxy:               nil, // load goes straight to the target
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.Conns,
		MaxIdleConnsPerHost: o.Conns,
		// Shorter than a draining server's linger (sluice-server keeps
		// idle connections open for about 20 s after its drain delay):
		// the client drops a connection it left idle before the server
		// has to close it, which could race the client's next request.
		IdleConnTimeout:    15 * time.Second,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		WriteBufferSize:    16 << 10,
		ReadBufferSize:     16 << 10,
		// Requests go straight to RoundTrip (no redirects, no per-request
		// context), so the timeout is the transport's header deadline.
		ResponseHeaderTimeout: o.Timeout,
	}
	c := &Client{base: u, tr: tr, opts: o, start: time.Now(), stop: make(chan struct{})}
	tok := o.Token
	if o.TokenFile != "" {
		if tok, err = readToken(o.TokenFile); err != nil {
			return nil, err
		}
		go c.refreshToken()
	}
	c.token.Store(&tok)
	return c, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// refreshToken re-reads the token file until Close; a failed read keeps the
// token it has (the kubelet replaces the file atomically, so a read fails
// only when the volume is gone, and the old token may still be valid).
func (c *Client) refreshToken() {
	t := time.NewTicker(tokenRefresh)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if tok, err := readToken(c.opts.TokenFile); err == nil && tok != *c.token.Load() {
				c.token.Store(&tok)
			}
		}
	}
}

// Close drops idle connections and stops reading the token file.
func (c *Client) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.tr.CloseIdleConnections()
}

// BaseURL returns the endpoint the client targets.
func (c *Client) BaseURL() string { return c.base.String() }

// Session is one worker's view of the client: fixed headers (its Client-ID),
// a reusable body reader and response buffer.
type Session struct {
	c    *Client
	id   string
	tok  *string // the token hdr carries
	hdr  http.Header
	hdrJ http.Header // same plus Content-Type: application/json
	body *reqBody
	Resp bytes.Buffer // body of the last response, valid until the next call
	// retryAfter is the last response's Retry-After header ("" when it had
	// none or no response came).
	retryAfter string
}

// reqBody is a reusable request body. The transport may still be writing
// it after the response arrived (a server may answer before reading the
// whole body) and closes it when done, so a session reuses it (and the
// caller's byte slice) only once closed.
type reqBody struct {
	bytes.Reader
	closed atomic.Bool
}

func (b *reqBody) Close() error { b.closed.Store(true); return nil }

// settle waits until the transport has closed b. It almost always already
// has; a body still held after the request timeout is abandoned instead.
func (s *Session) settle(b *reqBody) {
	for deadline := time.Now().Add(s.c.opts.Timeout); !b.closed.Load(); {
		if time.Now().After(deadline) {
			s.body = &reqBody{}
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// NewSession returns a session that identifies itself with clientID.
func (c *Client) NewSession(clientID string) *Session {
	s := &Session{c: c, id: clientID, body: &reqBody{}}
	s.headers(c.token.Load())
	return s
}

// headers builds the session's fixed headers around token tok. New maps,
// not edits: a request still in the transport keeps the headers it has.
func (s *Session) headers(tok *string) {
	h := http.Header{}
	h.Set("Client-ID", s.id)
	h.Set("Accept", "application/json")
	if s.c.opts.ProjectID != "" {
		h.Set("X-Project-ID", s.c.opts.ProjectID)
	}
	if *tok != "" {
		h.Set("X-Auth-Token", *tok)
		h.Set("Authorization", "Bearer "+*tok)
	}
	hj := h.Clone()
	hj.Set("Content-Type", "application/json")
	s.tok, s.hdr, s.hdrJ = tok, h, hj
}

// URL builds an absolute URL for a path (with optional query), reusing the
// client's scheme and host.
func (c *Client) URL(path, rawQuery string) *url.URL {
	return &url.URL{Scheme: c.base.Scheme, Host: c.base.Host, Path: c.base.Path + path, RawQuery: rawQuery}
}

// Href resolves an href returned by the server ("/v2/queues/q/messages/id?claim_id=c").
func (c *Client) Href(href string) *url.URL {
	path, query, _ := strings.Cut(href, "?")
	if c.base.Path != "" && !strings.HasPrefix(path, c.base.Path+"/") {
		path = c.base.Path + path
	}
	return &url.URL{Scheme: c.base.Scheme, Host: c.base.Host, Path: path, RawQuery: query}
}

// Do sends one request and reads the whole response into s.Resp. A non-nil
// error means no HTTP status was received; status codes are the caller's
// to judge (see Reason).
func (s *Session) Do(method string, u *url.URL, body []byte) (int, error) {
	if tok := s.c.token.Load(); tok != s.tok {
		s.headers(tok)
	}
	req := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     s.hdr,
		Host:       u.Host,
	}
	var rb *reqBody
	if body != nil {
		rb = s.body
		rb.closed.Store(false)
		rb.Reset(body)
		req.Body = rb
		req.ContentLength = int64(len(body))
		req.Header = s.hdrJ
	}
	resp, err := s.c.tr.RoundTrip(req)
	s.retryAfter = ""
	if err == nil {
		s.retryAfter = resp.Header.Get("Retry-After")
		s.Resp.Reset()
		_, err = s.Resp.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	if rb != nil {
		s.settle(rb)
	}
	if err != nil {
		s.c.logError(method, u, err)
		return 0, err
	}
	return resp.StatusCode, nil
}

// RetryAfter reports whether the last response carried a Retry-After
// header and the delay it asked for in whole seconds, -1 when the value is
// neither delay-seconds nor an HTTP-date (see ParseRetryAfter). Like Resp,
// it is valid until the next call.
func (s *Session) RetryAfter() (secs int64, given bool) {
	if s.retryAfter == "" {
		return 0, false
	}
	if secs, ok := ParseRetryAfter(s.retryAfter, time.Now()); ok {
		return secs, true
	}
	return -1, true
}

// logError writes one failure without a status to ErrorLog, with the
// seconds since the client was made so it can be set against the run's
// faults and series.
func (c *Client) logError(method string, u *url.URL, err error) {
	if c.opts.ErrorLog == nil {
		return
	}
	n := c.logged.Add(1)
	if n > LoggedErrors {
		return
	}
	more := ""
	if n == LoggedErrors {
		more = " (further ones are counted in the summary, not logged)"
	}
	fmt.Fprintf(c.opts.ErrorLog, "sluice-bench: t=%.3fs %s %s: %v%s\n",
		time.Since(c.start).Seconds(), method, u.Path, err, more)
}

// QueuePath returns /v2/queues/{name}.
func QueuePath(name string) string { return "/v2/queues/" + url.PathEscape(name) }

// Limit renders ?limit=N.
func Limit(n int) string { return "limit=" + strconv.Itoa(n) }
