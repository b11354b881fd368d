package api

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
)

// testServer is a server listening on 127.0.0.1:0 for one test.
type testServer struct {
	*Server
	base string
	t    *testing.T
}

func startServer(t *testing.T, edit func(*config.Options)) *testServer {
	t.Helper()
	return serve(t, newTestServer(t, edit))
}

// serve answers with s on a free loopback port until the test ends.
func serve(t *testing.T, s *Server) *testServer {
	t.Helper()
	addr, cancel, done := listenAndServe(t, s)
	t.Cleanup(func() {
		if err := stopServing(cancel, done); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{Server: s, base: "http://" + addr, t: t}
}

// listenAndServe starts s.Serve on a free loopback port: cancel is its
// SIGTERM, and done receives what Serve returns.
func listenAndServe(t *testing.T, s *Server) (addr string, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln, nil) }()
	return ln.Addr().String(), cancel, errc
}

// stopServing ends a Serve a test started (cancel is its SIGTERM) and
// returns its result. The test's client drops its idle connections, as a
// client of a draining server should: Serve leaves open connections to
// their clients for most of the shutdown timeout.
func stopServing(cancel context.CancelFunc, done <-chan error) error {
	cancel()
	http.DefaultClient.CloseIdleConnections()
	return <-done
}

// hdr builds request headers; the default ones identify a client and project.
type hdr map[string]string

func std(extra ...string) hdr {
	h := hdr{"Client-ID": testClient, "X-Project-ID": "p1"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "<none>" {
			delete(h, extra[i])
			continue
		}
		h[extra[i]] = extra[i+1]
	}
	return h
}

type resp struct {
	status int
	header http.Header
	body   string
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func (ts *testServer) do(method, path string, h hdr, body string) resp {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if id := res.Header.Get("X-Openstack-Request-Id"); !strings.HasPrefix(id, "req-") || len(id) != 40 {
		ts.t.Errorf("%s %s: request id %q", method, path, id)
	}
	return resp{res.StatusCode, res.Header, string(b)}
}

// must fails unless the answer has the status.
func (ts *testServer) must(status int, method, path string, h hdr, body string) resp {
	ts.t.Helper()
	r := ts.do(method, path, h, body)
	if r.status != status {
		ts.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, status, r.body)
	}
	return r
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
