package zaqar

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Unit test of the HTTP plumbing only (headers, bodies, keep-alive,
// error reasons); behaviour against a queue server is tested with the
// real sluice-server in cmd/sluice-bench.
func TestSessionHeadersBodyAndKeepAlive(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Client-ID") != "cid" || r.Header.Get("X-Project-ID") != "proj" ||
			r.Header.Get("X-Auth-Token") != "tok" || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(400)
			return
		}
		if r.Method == "POST" && r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(415)
			return
		}
		w.WriteHeader(201)
		w.Write([]byte(r.URL.RawQuery))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, ProjectID: "proj", Token: "tok", Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := c.NewSession("cid")
	for i := 0; i < 50; i++ {
		st, err := s.Do("POST", c.URL("/v2/queues/q/claims", "limit=5"), []byte(`{}`))
		if err != nil || st != 201 || s.Resp.String() != "limit=5" {
			t.Fatalf("request %d: %d %v %q", i, st, err, s.Resp.String())
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("50 sequential requests used %d connections, want 1 (keep-alive)", n)
	}
	if u := c.Href("/v2/queues/q/messages/id?claim_id=c"); u.Path != "/v2/queues/q/messages/id" || u.RawQuery != "claim_id=c" {
		t.Errorf("href -> %v", u)
	}
}

func TestReasons(t *testing.T) {
	c, _ := New(Options{BaseURL: "http://127.0.0.1:1", Conns: 1, Timeout: time.Second})
	_, err := c.NewSession("x").Do("GET", c.URL("/", ""), nil)
	if got := Reason(0, err); got != "connection_refused" {
		t.Errorf("refused -> %q (%v)", got, err)
	}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) }))
	defer hang.Close()
	c, _ = New(Options{BaseURL: hang.URL, Conns: 1, Timeout: 100 * time.Millisecond})
	_, err = c.NewSession("x").Do("GET", c.URL("/", ""), nil)
	if got := Reason(0, err); got != "timeout" {
		t.Errorf("slow server -> %q (%v)", got, err)
	}
	if Reason(503, nil) != "http_503" {
		t.Error("status reason")
	}
	if _, err := New(Options{BaseURL: "ftp://x"}); err == nil {
		t.Error("ftp URL accepted")
	}
}

// A server may answer before reading the body; the session must not reuse
// the body (or let the caller reuse its slice) while the transport still
// writes it. Run with -race.
func TestEarlyResponseDoesNotRaceOnBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(413)
	}))
	defer srv.Close()
	c, _ := New(Options{BaseURL: srv.URL, Conns: 1, Timeout: 5 * time.Second})
	s := c.NewSession("cid")
	buf := make([]byte, 256<<10)
	for i := 0; i < 30; i++ {
		for j := range buf {
			buf[j] = byte('a' + i%26)
		}
		if st, err := s.Do("POST", c.URL("/", ""), buf); err == nil && st != 413 {
			t.Fatalf("status %d", st)
		}
	}
}

// A server that hangs up without answering: each request fails with a
// transport error; the error log gets the first LoggedErrors of them with
// method, path and the error, and only a count after that; answered
// requests, whatever their status, are never logged.
func TestErrorLogIsBounded(t *testing.T) {
	var hangUp atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hangUp.Load() {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(503)
	}))
	defer srv.Close()
	var log strings.Builder
	c, _ := New(Options{BaseURL: srv.URL, Conns: 1, Timeout: time.Second, ErrorLog: &log})
	s := c.NewSession("x")
	if st, err := s.Do("GET", c.URL("/v2/queues/q/stats", ""), nil); err != nil || st != 503 || log.Len() != 0 {
		t.Fatalf("answered 503: %d %v, logged %q", st, err, log.String())
	}
	hangUp.Store(true)
	for i := 0; i < LoggedErrors+5; i++ {
		if _, err := s.Do("POST", c.URL("/v2/queues/q/messages", ""), []byte(`{}`)); err == nil {
			t.Fatalf("request %d: no error from a server that hangs up", i)
		}
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != LoggedErrors {
		t.Fatalf("%d lines logged for %d failures, want %d:\n%s", len(lines), LoggedErrors+5, LoggedErrors, log.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "POST /v2/queues/q/messages: ") || !strings.Contains(l, "EOF") {
			t.Errorf("line without method, path or error: %q", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "not logged") {
		t.Errorf("the last logged line does not say that further ones are not: %q", lines[len(lines)-1])
	}
}

// A token file is read at start and again as the kubelet rotates it: the
// requests after a rotation carry the new token, those before the old one.
func TestTokenFileRotates(t *testing.T) {
	defer func(d time.Duration) { tokenRefresh = d }(tokenRefresh)
	tokenRefresh = 10 * time.Millisecond
	var seen atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Auth-Token")
		if r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(400)
			return
		}
		seen.Store(&tok)
		w.WriteHeader(204)
	}))
	defer srv.Close()
	file := t.TempDir() + "/token"
	if _, err := New(Options{BaseURL: srv.URL, TokenFile: file}); err == nil {
		t.Fatal("a missing token file was accepted")
	}
	write := func(tok string) {
		// As the kubelet does: a new file renamed over the old one.
		if err := os.WriteFile(file+".new", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	if _, err := New(Options{BaseURL: srv.URL, TokenFile: file}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty token file: %v", err)
	}
	write("first")
	c, err := New(Options{BaseURL: srv.URL, TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.NewSession("cid")
	call := func() string {
		if st, err := s.Do("GET", c.URL("/v2/ping", ""), nil); err != nil || st != 204 {
			t.Fatalf("ping: %d %v", st, err)
		}
		return *seen.Load()
	}
	if got := call(); got != "first" {
		t.Fatalf("token %q, want first", got)
	}
	write("second")
	deadline := time.Now().Add(5 * time.Second)
	for call() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the rotated token was never sent")
		}
		time.Sleep(5 * time.Millisecond)
	}
	os.Remove(file)
	time.Sleep(5 * tokenRefresh)
	if got := call(); got != "second" {
		t.Fatalf("after the file went away: token %q, want the last one read", got)
	}
}
