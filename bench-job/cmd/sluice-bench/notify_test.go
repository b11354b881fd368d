package main

import (
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// The notifications scenario against a real sluice-server: the built-in
// receiver subscribes itself, every acknowledged post is notified exactly
// once (signed, when a secret is given), and the baseline posts without a
// subscriber and reports no delivery block.
func TestNotificationsScenario(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		r := runJSON(t, "--scenario", "notifications", "-s", url, "-t", "2", "--rate", "50", "-qno", "2",
			"--receiver-secret", "bench-secret", "--drain", "20s", "-q", "notes")
		d, n := r.Delivery, r.Ops["notify"]
		if d == nil || n == nil {
			t.Fatalf("no delivery/notify blocks: %+v", r)
		}
		if d.Produced == 0 || d.Produced != r.Ops["post"].OK || d.Lost != 0 || d.Duplicated != 0 || d.Unique != d.Produced {
			t.Errorf("delivery: %+v (posts ok %d)", *d, r.Ops["post"].OK)
		}
		if n.OK != d.Produced || n.Failed != 0 || n.P50 <= 0 || n.P99 < n.P50 {
			t.Errorf("notify op: ok %d failed %d errors %v p50 %.3f p99 %.3f", n.OK, n.Failed, n.Errors, n.P50, n.P99)
		}
		if !strings.HasPrefix(r.Params.Subscriber, "http://127.0.0.1:") {
			t.Errorf("subscriber echoed as %q", r.Params.Subscriber)
		}
		// The thresholds apply: a p99 no run can meet fails with exit 99.
		code, _, errs := cli(t, "run", "--scenario", "notifications", "-s", url, "-t", "1", "--rate", "20",
			"--max-p99", "0.000001", "--max-lost", "0", "-q", "notes-th")
		if code != exitThreshold || !strings.Contains(errs, "p99") {
			t.Errorf("threshold: exit %d, stderr %s", code, errs)
		}

		base := runJSON(t, "--scenario", "notifications", "-s", url, "-t", "1", "--rate", "50", "--subscribe=false", "-q", "notes-base")
		if base.Delivery != nil || base.Ops["notify"] != nil || base.Ops["post"].OK == 0 {
			t.Errorf("baseline: delivery %+v notify %+v post %+v", base.Delivery, base.Ops["notify"], base.Ops["post"])
		}
	})
}

func TestNotificationsScenarioRejectsConsumers(t *testing.T) {
	for _, args := range [][]string{
		{"-cp", "1", "-cw", "2"},
		{"-op", "1", "-ow", "1"},
		{"-pw", "0"},
		{"--no-verify"},
		{"--receiver-listen", ""},
	} {
		full := append([]string{"run", "--scenario", "notifications", "-s", "http://127.0.0.1:9"}, args...)
		if code, _, errs := cli(t, full...); code != exitUsage || !strings.Contains(errs, "notifications") {
			t.Errorf("%v: exit %d, stderr %s", args, code, errs)
		}
	}
}

// Two pods (own queues, own receivers) merge like any scenario: notify
// latencies and the delivery accounting add up, from full summaries and
// from the termination logs alike.
func TestNotificationsPodsMerge(t *testing.T) {
	url := testenv.Server(t, "memory")
	tmp := t.TempDir()
	var dirs, logs []string
	var posted, notified int64
	for i := range 2 {
		dir, tl := filepath.Join(tmp, "pod"+itoa(i)), filepath.Join(tmp, "tl"+itoa(i))
		r := runJSON(t, "--scenario", "notifications", "-s", url, "-t", "1", "--rate", "40", "--pod-index", itoa(i),
			"-q", "nmerge", "--out", dir, "--termination-log", tl)
		posted += r.Ops["post"].OK
		notified += r.Ops["notify"].OK
		dirs, logs = append(dirs, dir), append(logs, tl)
	}
	mdir := filepath.Join(tmp, "merged")
	mustRun(t, append([]string{"merge", "--out", mdir}, dirs...)...)
	merged, err := result.Load(mdir)
	if err != nil {
		t.Fatal(err)
	}
	fromLogs, err := result.Parse([]byte(mustRun(t, append([]string{"merge"}, logs...)...)))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*result.Result{"run dirs": merged, "termination logs": fromLogs} {
		if m.Pods != 2 || m.Ops["notify"].OK != notified || m.Ops["post"].OK != posted {
			t.Errorf("%s: pods %d notify ok %d (want %d) post ok %d (want %d)", name, m.Pods, m.Ops["notify"].OK, notified, m.Ops["post"].OK, posted)
		}
		if m.Delivery == nil || m.Delivery.Produced != posted || m.Delivery.Lost != 0 || m.Delivery.Duplicated != 0 {
			t.Errorf("%s: delivery %+v, posted %d", name, m.Delivery, posted)
		}
	}
}
