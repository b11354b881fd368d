package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"sluice.dev/bench/internal/testenv"
)

// flakyProxy stands between sluice-bench and a real sluice-server and breaks
// what a fault breaks: the first failDeletes deletes answer 503 without
// reaching the server (the message stays claimed), and the first
// loseClaims claims reach the server but their answer is replaced by a 503
// (the messages are claimed, and nobody knows it).
type flakyProxy struct {
	next        *httputil.ReverseProxy
	deletes     atomic.Int64
	claims      atomic.Int64
	failDeletes int64
	loseClaims  int64
}

func (p *flakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "DELETE" && strings.Contains(r.URL.Path, "/messages/") && p.deletes.Add(1) <= p.failDeletes:
		w.WriteHeader(http.StatusServiceUnavailable)
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/claims") && p.claims.Add(1) <= p.loseClaims:
		p.next.ServeHTTP(discard{w.Header()}, r)
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		p.next.ServeHTTP(w, r)
	}
}

// discard is a ResponseWriter that drops the answer.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return http.Header{} }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// TestFaultsLoseNothingAndRedeliveriesAreNotDuplicates: with deletes that
// failed and claims whose answers were lost, the messages held by those
// claims come back when the claims expire (60 s, the shortest ttl a server
// takes); the drain waits for them, so nothing is counted lost, and the
// messages claimed again after a failed delete count as redelivered, not
// duplicated.
func TestFaultsLoseNothingAndRedeliveriesAreNotDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 60 s claim to expire")
	}
	target, _ := url.Parse(testenv.Server(t, "memory"))
	proxy := &flakyProxy{next: httputil.NewSingleHostReverseProxy(target), failDeletes: 3, loseClaims: 2}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	r := runJSON(t, "--scenario", "task-distribution", "-s", srv.URL, "-t", "2", "-pp", "1", "-pw", "2", "-cp", "1", "-cw", "2",
		"-q", "flaky", "--claim-ttl", "60", "--claim-grace", "60", "--drain", "100s")
	d := r.Delivery
	if d == nil || d.Produced == 0 {
		t.Fatalf("no delivery check: %+v", d)
	}
	if d.Lost != 0 || d.Duplicated != 0 || d.Redelivered != proxy.failDeletes {
		t.Fatalf("lost %d, duplicated %d, redelivered %d (want 0, 0, %d)\n%+v\nclaim %+v\ndelete %+v", d.Lost, d.Duplicated, d.Redelivered, proxy.failDeletes, *d, *r.Ops["claim"], *r.Ops["delete"])
	}
	if n := r.Ops["delete"].Failed; n != proxy.failDeletes {
		t.Errorf("%d failed deletes reported, want %d", n, proxy.failDeletes)
	}
	if r.Ops["claim"].Extra["drain_ended_before_claims_expired"] != 0 {
		t.Error("the drain gave up before the claims expired")
	}
}
