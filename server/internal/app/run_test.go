package app

import (
	"context"
	"net"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/logging"
	"sluice.dev/server/internal/testutil"
)

// TestRun drives the whole command path: open the store by URI, serve on a
// free port, answer with metrics for HTTP and storage, stop on cancel.
func TestRun(t *testing.T) {
	opts := config.Defaults()
	opts.Listen = "127.0.0.1:0"
	opts.DrainDelay = 0
	opts.AccessLog = true
	var logs testutil.SyncBuffer
	log, closer := logging.New(&logs, "info")
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
	body := ts.must(200, "GET", "/metrics", "")
	for _, want := range []string{
		`sluice_storage_op_duration_seconds_count{driver="memory",op="messages.post"} 1`,
		`sluice_storage_up 1`,
		`sluice_queue_messages{state="free"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	hangUp()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	closer.Close()
	out := logs.String()
	if !strings.Contains(out, `"msg":"request","status":201,"method":"POST","route":"/v2/queues/{queue_name}/messages"`) ||
		!strings.Contains(out, `"request_id":"req-`) {
		t.Errorf("access log:\n%s", out)
	}
	bad := opts
	bad.Store = "nosuch://x"
	if err := Run(context.Background(), bad, log, nil); err == nil {
		t.Error("unknown store scheme accepted")
	}
}
