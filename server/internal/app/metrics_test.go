package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/logging"
)

// TestRunServesMetricsOnTheirOwnListener: with --metrics-listen, /metrics
// answers there and the API port answers 404 for it, as for any unknown path.
func TestRunServesMetricsOnTheirOwnListener(t *testing.T) {
	// Bind a free port first so the test knows the address Run takes.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := probe.Addr().String()
	probe.Close()
	opts := config.Defaults()
	opts.Listen = "127.0.0.1:0"
	opts.MetricsListen = metricsAddr
	opts.DrainDelay = 0
	opts.AccessLog = false
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	log, closer := logging.New(io.Discard, "info")
	defer closer.Close()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts, log, func(a net.Addr) { addr <- a }) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	ts := client{t: t, base: base}
	ts.must(201, "POST", "/v2/queues/q/messages", `{"messages":[{"body":1}]}`)
	unknown := ts.must(404, "GET", "/no-such-path", "")
	if got := ts.must(404, "GET", "/metrics", ""); got != unknown {
		t.Errorf("the API port's /metrics answers %q, an unknown path %q", got, unknown)
	}
	res, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `sluice_storage_op_duration_seconds_count{driver="memory",op="messages.post"} 1`) {
		t.Errorf("metrics port: status %d, body lacks the post:\n%.400s", res.StatusCode, body)
	}
	// The metrics port serves nothing else: the API is not reachable through it.
	res, err = http.Get("http://" + metricsAddr + "/v2/queues")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("metrics port GET /v2/queues: %d, want 404", res.StatusCode)
	}
	hangUp()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", metricsAddr); err == nil {
		t.Error("the metrics listener is still open after Run returned")
	}
}
