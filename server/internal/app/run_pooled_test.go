package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestRunPooledDepth checks that with --catalog the scrape-time depth spans
// the pools: messages posted to a queue placed on a pool are counted, not
// only those on the default store.
func TestRunPooledDepth(t *testing.T) {
	ts, stop := runPooled(t)
	ts.must(201, "POST", "/v2/queues/pooled/messages", `{"messages":[{"body":1},{"body":2}]}`)
	body := ts.must(200, "GET", "/metrics", "")
	for _, want := range []string{`sluice_storage_up 1`, `sluice_queue_messages{state="free"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	stop()
}

// TestRunTimesPoolCalls: with --catalog, calls routed to a pool are timed
// and their errors counted under the pool's name, as Prometheus' own text
// parser reads the scrape.
func TestRunTimesPoolCalls(t *testing.T) {
	ts, stop := runPooled(t)
	const posts = 3
	for range posts {
		ts.must(201, "POST", "/v2/queues/pooled/messages", `{"messages":[{"body":1}]}`)
	}
	ts.must(404, "GET", "/v2/queues/pooled/messages/"+storage.NewID(), "")
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(ts.must(200, "GET", "/metrics", "")))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	if got := series(mfs, "sluice_storage_op_duration_seconds", "p1", "messages.post", ""); got == nil || got.GetHistogram().GetSampleCount() != posts {
		t.Errorf("pool p1's messages.post timings: %v, want %d observations", got, posts)
	}
	if got := series(mfs, "sluice_storage_op_errors_total", "p1", "messages.get", "not found"); got == nil || got.GetCounter().GetValue() != 1 {
		t.Errorf("pool p1's messages.get not-found errors: %v, want 1", got)
	}
	stop()
}

// series is the sample of family name with the given driver, op and (when
// not empty) kind labels, or nil.
func series(mfs map[string]*dto.MetricFamily, name, driver, op, kind string) *dto.Metric {
	for _, m := range mfs[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["driver"] == driver && labels["op"] == op && (kind == "" || labels["kind"] == kind) {
			return m
		}
	}
	return nil
}

// runPooled runs the server with a catalog on one redis-server and pool p1
// (weight 100) on another; stop ends the run and fails the test if it
// returned an error.
func runPooled(t *testing.T) (ts client, stop func()) {
	t.Helper()
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
	select {
	case a := <-addr:
		ts = client{t: t, base: "http://" + a.String()}
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	ts.must(201, "PUT", "/v2/pools/p1", `{"weight":100,"uri":"`+pool.URL+`"}`, "X-Roles", "admin")
	return ts, func() {
		hangUp()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
