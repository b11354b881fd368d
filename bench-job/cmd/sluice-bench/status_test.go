package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// TestMergeStatusOfRealPods runs two pods' worth of sluice-bench against a
// real sluice-server and checks what `merge --status` gives the operator.
func TestMergeStatusOfRealPods(t *testing.T) {
	url := testenv.Server(t, "memory")
	dir := t.TempDir()
	var logs []string
	for _, q := range []string{"st0", "st1"} {
		p := filepath.Join(dir, q)
		mustRun(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "1", "-pw", "2", "-cw", "2", "-q", q, "--drain", "5s",
			"--termination-log", p, "--progress", "never", "--json")
		logs = append(logs, p)
	}
	code, out, errs := cli(t, append([]string{"merge", "--status", "--own-queues", "--max-lost", "0", "--min-rps", "1"}, logs...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var st result.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r := st.Results
	if r.Pods != 2 || r.Produced == 0 || r.Lost != 0 || !r.Exact || r.RequestsPerSecond <= 0 || r.Operations["post"].Requests == 0 {
		t.Errorf("results %+v", r)
	}
	if st.Verdict != "Pass" || st.VerdictReasons[0] != "all thresholds met" || !strings.HasSuffix(st.Message, ": Pass") {
		t.Errorf("verdict %+v", st)
	}
	// The status speaks camelCase only.
	for _, k := range []string{`"p99Ms"`, `"requestsPerSecond"`, `"verdictReasons"`} {
		if !strings.Contains(out, k) {
			t.Errorf("no %s in %s", k, out)
		}
	}
	if strings.Contains(out, "p99_ms") || strings.Contains(out, "reqs_per_sec") {
		t.Errorf("snake_case in the status: %s", out)
	}
	// A missed threshold: exit 99 with the same document.
	code, out, _ = cli(t, append([]string{"merge", "--status", "--min-rps", "1e9"}, logs...)...)
	if err := json.Unmarshal([]byte(out), &st); code != exitThreshold || err != nil || st.Verdict != "Fail" ||
		!strings.HasPrefix(st.VerdictReasons[0], "requests/s ") {
		t.Errorf("exit %d verdict %+v (%v)", code, st, err)
	}
}

func TestMergeStatusNamesTheBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "td-r1-0-x")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := cli(t, "merge", "--status", bad)
	if code != exitFailure || !strings.Contains(errs, "td-r1-0-x") || !strings.Contains(errs, "not a sluice-bench summary") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestCompareStatusReadsStdin(t *testing.T) {
	old := stdin
	defer func() { stdin = old }()
	stdin = strings.NewReader(`{"benchmark": "base", "results": {"requestsPerSecond": 10, "p99Ms": 2},
		"other": {"spec": {"scenario": "s"}, "status": {"results": {"requestsPerSecond": 5, "p99Ms": 4}}}}`)
	out := mustRun(t, "compare", "--status")
	var c result.Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.Operations["total"]["requestsPerSecondRatio"] != 2 || c.Message != "vs base (s): req/s x2.0, p99 x0.5" {
		t.Errorf("%+v", c)
	}
	stdin = strings.NewReader("{")
	if code, _, errs := cli(t, "compare", "--status"); code != exitFailure || !strings.Contains(errs, "compare input") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
