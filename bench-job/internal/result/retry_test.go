package result

import (
	"encoding/json"
	"strings"
	"testing"

	"sluice.dev/bench/internal/metrics"
)

// retryPod is one pod's run as a termination log and back: post failed
// with 503s (most with Retry-After), claim with 507s and timeouts.
func retryPod(t *testing.T, start int64, n503, ra503, secs int64) *Result {
	t.Helper()
	r := &Result{Scenario: "task-distribution", Pods: 1, Start: start, End: start + 2000, Ops: map[string]*OpResult{
		"post": {Requests: 10 + n503, OK: 10, Errors: map[string]int64{"http_503": n503},
			RetryAfter: map[string]metrics.RetryAfter{"http_503": {Responses: ra503, Min: secs, Max: secs}}},
		"claim": {Requests: 6, OK: 2, Errors: map[string]int64{"http_507": 3, "timeout": 1},
			RetryAfter: map[string]metrics.RetryAfter{"http_507": {Responses: 2, Min: 1, Max: 30, Unreadable: 1}}},
	}}
	if err := r.Summarize(); err != nil {
		t.Fatal(err)
	}
	raw, err := r.TermLog()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestRetryAfterReachesTheStatus: through the termination logs and their
// merge, status.results counts failures by reason over every operation
// and, beside them, those that carried Retry-After, in one spelling.
func TestRetryAfterReachesTheStatus(t *testing.T) {
	_, st := mergeStatus(t, nil, true, retryPod(t, 1000, 7, 5, 2), retryPod(t, 1100, 4, 4, 3))
	r := st.Results
	wantErr := map[string]int64{"http_503": 11, "http_507": 6, "timeout": 2}
	if len(r.ErrorsByReason) != len(wantErr) || r.Errors != 19 {
		t.Fatalf("errors %d by reason %v, want 19 as %v", r.Errors, r.ErrorsByReason, wantErr)
	}
	for k, v := range wantErr {
		if r.ErrorsByReason[k] != v {
			t.Errorf("%s: %d, want %d", k, r.ErrorsByReason[k], v)
		}
	}
	want := map[string]metrics.RetryAfter{
		"http_503": {Responses: 9, Min: 2, Max: 3},
		"http_507": {Responses: 4, Min: 1, Max: 30, Unreadable: 2},
	}
	if len(r.RetryAfter) != 2 || r.RetryAfter["http_503"] != want["http_503"] || r.RetryAfter["http_507"] != want["http_507"] {
		t.Errorf("retryAfter %+v, want %+v", r.RetryAfter, want)
	}
	b, _ := json.Marshal(st)
	for _, k := range []string{`"errorsByReason":{`, `"retryAfter":{"http_503":{"responses":9,"min":2,"max":3}`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("no %s in %s", k, b)
		}
	}
	// A run where nothing failed says nothing of either.
	ok := &Result{Scenario: "task-distribution", Start: 1000, End: 2000, Ops: map[string]*OpResult{"post": {Requests: 3, OK: 3}}}
	if err := ok.Summarize(); err != nil {
		t.Fatal(err)
	}
	if st := StatusOf(ok, nil, true); st.Results.ErrorsByReason != nil || st.Results.RetryAfter != nil {
		t.Errorf("nothing failed: %+v", st.Results)
	}
}

// TestRetryAfterIsShedWithTheErrors: a termination log that must shed its
// error tables sheds Retry-After with them (never a Retry-After count
// without the errors it belongs to).
func TestRetryAfterIsShedWithTheErrors(t *testing.T) {
	r := retryPod(t, 1000, 7, 5, 2)
	c := r.compact([]string{"step_hist", "bitsets", "e2e_hist", "hist", "steps", "errors"})
	if op := c.Ops["post"]; op.Err != nil || op.RA != nil {
		t.Errorf("shed errors, kept %+v", op)
	}
	c = r.compact(nil)
	if op := c.Ops["post"]; op.Err["http_503"] != 7 || op.RA["http_503"].Responses != 5 {
		t.Errorf("kept errors: %+v", op)
	}
}

// TestAnalyzeFaultsCountsRetryAfterPerWindow: each fault's window sums the
// Retry-After of its seconds, as it sums their failures.
func TestAnalyzeFaultsCountsRetryAfterPerWindow(t *testing.T) {
	const t0 = 1_700_000_000_000
	var pts []metrics.Point
	for s := int64(t0 / 1000); s < (t0+40_000)/1000; s++ {
		p := metrics.Point{T: s, N: 1000}
		switch off := s - t0/1000; {
		case off >= 10 && off < 13: // shard down: every failure a 503 with Retry-After: 2
			p.N, p.Err = 100, 50
			p.AddFailures(map[string]int64{"http_503": 50}, s*1000+100, s*1000+900)
			p.AddRetries(map[string]metrics.RetryAfter{"http_503": {Responses: 50, Min: 2, Max: 2}})
		case off == 30: // a server gone: failures without any answer
			p.N, p.Err = 0, 4
			p.AddFailures(map[string]int64{"eof": 4}, s*1000+100, s*1000+200)
		}
		pts = append(pts, p)
	}
	res := &Result{Start: t0, End: t0 + 40_000, Ops: map[string]*OpResult{"post": {Series: pts}}}
	got := AnalyzeFaults(res, []Fault{{Name: "shard", At: t0 + 10_000}, {Name: "server", At: t0 + 30_000}})
	shard, server := got[0], got[1]
	if shard.Errors["http_503"] != 150 || shard.RetryAfter["http_503"] != (metrics.RetryAfter{Responses: 150, Min: 2, Max: 2}) {
		t.Errorf("shard: errors %v, retry %+v", shard.Errors, shard.RetryAfter)
	}
	if server.Errors["eof"] != 4 || server.RetryAfter != nil {
		t.Errorf("server: errors %v, retry %+v", server.Errors, server.RetryAfter)
	}
	// The per-second Retry-After survives a merge of two pods' series.
	merged, err := mergeSeries(pts, pts)
	if err != nil {
		t.Fatal(err)
	}
	res.Ops["post"].Series = merged
	if g := AnalyzeFaults(res, []Fault{{Name: "shard", At: t0 + 10_000}})[0]; g.RetryAfter["http_503"].Responses != 300 || g.Errors["http_503"] != 300 {
		t.Errorf("two pods: errors %v, retry %+v", g.Errors, g.RetryAfter)
	}
}

func TestReasonsText(t *testing.T) {
	for _, c := range []struct {
		errs  map[string]int64
		retry map[string]metrics.RetryAfter
		want  string
	}{
		{nil, nil, ""},
		{map[string]int64{"timeout": 3, "http_503": 120}, map[string]metrics.RetryAfter{"http_503": {Responses: 120, Min: 2, Max: 2}},
			"http_503: 120 (Retry-After on 120: 2 s), timeout: 3"},
		{map[string]int64{"http_507": 10}, map[string]metrics.RetryAfter{"http_507": {Responses: 7, Min: 1, Max: 30, Unreadable: 2}},
			"http_507: 10 (Retry-After on 7: 1-30 s, 2 unreadable)"},
		{map[string]int64{"http_503": 4}, map[string]metrics.RetryAfter{"http_503": {Responses: 1, Unreadable: 1}},
			"http_503: 4 (Retry-After on 1: 1 unreadable)"},
		{map[string]int64{"http_503": 4}, nil, "http_503: 4"},
	} {
		if got := Reasons(c.errs, c.retry); got != c.want {
			t.Errorf("Reasons(%v, %v) = %q, want %q", c.errs, c.retry, got, c.want)
		}
	}
}
