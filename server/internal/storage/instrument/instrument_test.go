package instrument_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/instrument"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/storagetest"
)

// The wrapper must be invisible: the conformance suite passes through it,
// optional interfaces included (Depth and the leftover check).
func TestConformanceThroughWrapper(t *testing.T) {
	reg := prometheus.NewRegistry()
	storagetest.Run(t, func(t testing.TB, clock storage.Clock) storage.Driver {
		d, err := instrument.Wrap(memory.New(storagetest.Options(clock)), "memory", reg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// onlyDriver hides the memory driver's optional interfaces.
type onlyDriver struct{ storage.Driver }

func TestOptionalInterfacesFollowTheDriver(t *testing.T) {
	reg := prometheus.NewRegistry()
	cases := []struct {
		name      string
		d         storage.Driver
		wantDepth bool
	}{
		{"memory", memory.New(storage.Options{}), true},
		{"plain", onlyDriver{memory.New(storage.Options{})}, false},
	}
	for _, tc := range cases {
		w, err := instrument.Wrap(tc.d, tc.name, reg)
		if err != nil {
			t.Fatal(err)
		}
		_, depth := w.(storage.DepthReporter)
		_, insp := w.(storage.Inspector)
		_, mig := w.(storage.Migrator)
		if depth != tc.wantDepth || insp != tc.wantDepth || mig != tc.wantDepth {
			t.Errorf("%s: wrapped DepthReporter %v Inspector %v Migrator %v, want %v", tc.name, depth, insp, mig, tc.wantDepth)
		}
		// The pooled driver asks a pool's message store whether a delete
		// removed anything; a wrapped pool must still answer.
		_, wantRemover := tc.d.Messages().(storage.Remover)
		if _, rm := w.Messages().(storage.Remover); rm != wantRemover || !wantRemover {
			t.Errorf("%s: wrapped message store is a Remover: %v, the driver's: %v", tc.name, rm, wantRemover)
		}
	}
}

func TestRecordsDurationsAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, err := instrument.Wrap(memory.New(storage.Options{}), "mem", reg)
	if err != nil {
		t.Fatal(err)
	}
	// A second driver on the same registry shares the families.
	if _, err := instrument.Wrap(memory.New(storage.Options{}), "mem2", reg); err != nil {
		t.Fatalf("second wrap on one registry: %v", err)
	}
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "q"}
	// Error series appear with their first error: the 252 op and kind
	// pairs of each wrapped driver would otherwise be held from the start.
	if n := countSeries(t, reg, "sluice_storage_op_errors_total"); n != 0 {
		t.Errorf("%d error series before any error, want none", n)
	}
	for i := 0; i < 3; i++ {
		if _, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Minute, Body: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Messages().Get(ctx, q, "missing"); !storage.Is(err, storage.NotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if got := sample(t, reg, "sluice_storage_op_errors_total", "mem", "messages.get", "not found"); got != 1 {
		t.Errorf("not-found errors of messages.get = %v, want 1", got)
	}
	if n := countSeries(t, reg, "sluice_storage_op_errors_total"); n != 1 {
		t.Errorf("%d error series after one error, want 1", n)
	}
	for range 2 {
		if _, err := d.Messages().Get(ctx, q, "missing"); !storage.Is(err, storage.NotFound) {
			t.Fatalf("get missing: %v", err)
		}
	}
	if got := sample(t, reg, "sluice_storage_op_errors_total", "mem", "messages.get", "not found"); got != 3 {
		t.Errorf("not-found errors of messages.get = %v, want 3", got)
	}
	if got := sample(t, reg, "sluice_storage_op_duration_seconds", "mem", "messages.post", ""); got != 3 {
		t.Errorf("messages.post observations = %v, want 3", got)
	}
	if got := sample(t, reg, "sluice_storage_op_duration_seconds", "mem2", "messages.post", ""); got != 0 {
		t.Errorf("second driver's observations = %v, want 0", got)
	}
}

// sample returns a counter's value or a histogram's sample count for the
// labels given (kind "" matches any).
func sample(t *testing.T, reg *prometheus.Registry, name, driver, op, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["driver"] != driver || labels["op"] != op || (kind != "" && labels["kind"] != kind) {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s{driver=%q,op=%q,kind=%q}", name, driver, op, kind)
	return 0
}

// countSeries is how many series of the metric family name reg holds.
func countSeries(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
