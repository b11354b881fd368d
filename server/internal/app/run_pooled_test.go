package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/testutil"
)

// TestRunPooledDepth checks that with --catalog the scrape-time depth spans
// the pools: messages posted to a queue placed on a pool are counted, not
// only those on the default store.
func TestRunPooledDepth(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	pool := testutil.StartRedis(t, testutil.RedisOptions{})
	opts := config.Defaults()
	opts.Listen = "127.0.0.1:0"
	opts.DrainDelay = 0
	opts.Catalog = mgmt.URL
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, opts, slog.New(slog.NewTextHandler(io.Discard, nil)), func(a net.Addr) { addr <- a })
	}()
	var ts client
	select {
	case a := <-addr:
		ts = client{t: t, base: "http://" + a.String()}
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	ts.must(201, "PUT", "/v2/pools/p1", `{"weight":100,"uri":"`+pool.URL+`"}`, "X-Roles", "admin")
	ts.must(201, "POST", "/v2/queues/pooled/messages", `{"messages":[{"body":1},{"body":2}]}`)
	body := ts.must(200, "GET", "/metrics", "")
	for _, want := range []string{`sluice_storage_up 1`, `sluice_queue_messages{state="free"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
