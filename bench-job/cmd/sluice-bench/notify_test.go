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

// --receiver-fault is checked like every other flag: a usage error (exit
// 2) naming the flag for every malformed value, and for a run without a
// receiver.
func TestReceiverFaultFlag(t *testing.T) {
	base := []string{"run", "--check", "-s", "http://127.0.0.1:9", "--scenario", "notifications"}
	for _, args := range [][]string{
		{"--receiver-fault", "at=6,duration=10,latency=500ms,fail=50"},
		{"--receiver-fault", "at=0,duration=1,fail=100", "--receiver-fault", "at=1,duration=2.5,latency=30s"},
		{"--receiver-fault", "at=0.5,duration=0.5,latency=1ms"},
	} {
		if code, _, errs := cli(t, append(base, args...)...); code != exitOK {
			t.Errorf("%v: exit %d, stderr %s", args, code, errs)
		}
	}
	good := map[string]string{"at": "6", "duration": "10", "latency": "500ms", "fail": "50"}
	value := func(key, v string) string {
		var parts []string
		for _, k := range []string{"at", "duration", "latency", "fail"} {
			switch {
			case k != key:
				parts = append(parts, k+"="+good[k])
			case v != "<missing>":
				parts = append(parts, k+"="+v)
			}
		}
		return strings.Join(parts, ",")
	}
	var bad [][]string
	for key, vs := range map[string][]string{
		"at":       {"<missing>", "-1", "soon", "86401"},
		"duration": {"<missing>", "0", "-1", "10s"},
		"latency":  {"-1s", "31s", "500"},
		"fail":     {"-1", "101", "half"},
	} {
		for _, v := range vs {
			bad = append(bad, []string{"--receiver-fault", value(key, v)})
		}
	}
	bad = append(bad,
		[]string{"--receiver-fault", value("", "") + ",drop=5"},                                                  // unknown key
		[]string{"--receiver-fault", "at=6,duration=10"},                                                         // does nothing
		[]string{"--receiver-fault", "at=6,duration=10,latency=0"},                                               // does nothing
		[]string{"--receiver-fault", ""},                                                                         // empty
		[]string{"--receiver-fault", "at=6,duration=10,fail=5,at=7"},                                             // repeated key
		[]string{"--receiver-fault", "at=0,duration=5,fail=5", "--receiver-fault", "at=4,duration=5,latency=1s"}, // overlap
		[]string{"--receiver-fault", value("", ""), "--subscribe=false"},                                         // no receiver
	)
	for _, args := range bad {
		code, _, errs := cli(t, append(base, args...)...)
		if code != exitUsage || !strings.Contains(errs, "receiver-fault") {
			t.Errorf("%v: exit %d, stderr %s", args, code, errs)
		}
	}
	// Only the notifications scenario has a receiver.
	for _, sc := range []string{"custom", "flood", "task-distribution"} {
		code, _, errs := cli(t, "run", "--check", "-s", "http://127.0.0.1:9", "--scenario", sc, "--receiver-fault", value("", ""))
		if code != exitUsage || !strings.Contains(errs, "only the notifications scenario") {
			t.Errorf("scenario %s: exit %d, stderr %s", sc, code, errs)
		}
	}
}

// A receiver that refuses every other call for the whole load: the
// server redelivers what it refused, so nothing is lost or duplicated,
// and the refusals are counted in ops.notify.extra. The run directory
// lists the fault for report/merge --faults.
func TestNotificationsReceiverFaultRedelivered(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		dir := filepath.Join(t.TempDir(), "run")
		r := runJSON(t, "--scenario", "notifications", "-s", url, "-t", "2", "--rate", "50", "-qno", "2",
			"--receiver-fault", "at=0,duration=2,latency=5ms,fail=50", "--drain", "30s", "-q", "notes-fault", "--out", dir)
		d, n := r.Delivery, r.Ops["notify"]
		if d == nil || n == nil {
			t.Fatalf("no delivery/notify blocks: %+v", r)
		}
		x := n.Extra
		if x["receiver_fault_failed"] == 0 || x["receiver_fault_delayed"] < x["receiver_fault_failed"] || x["receiver_fault_calls"] < 2*x["receiver_fault_failed"]-1 {
			t.Errorf("fault counters %v: want failures, every call of the window delayed, half of them failed", x)
		}
		if d.Produced == 0 || d.Produced != r.Ops["post"].OK || d.Lost != 0 || d.Duplicated != 0 || d.Unique != d.Produced {
			t.Errorf("delivery: %+v (posts ok %d): the refused notifications were not all redelivered", *d, r.Ops["post"].OK)
		}
		if n.OK != d.Produced || n.Failed != 0 {
			t.Errorf("notify op: ok %d failed %d errors %v", n.OK, n.Failed, n.Errors)
		}
		faults, err := result.LoadFaults(filepath.Join(dir, "receiver-faults.json"))
		if err != nil || len(faults) != 1 || faults[0].Name != "slow-receiver" || faults[0].At != r.Start {
			t.Fatalf("receiver-faults.json: %+v, %v (start %d)", faults, err, r.Start)
		}
		merged, err := result.Parse([]byte(mustRun(t, "merge", "--faults", filepath.Join(dir, "receiver-faults.json"), dir)))
		if err != nil || len(merged.Faults) != 1 || merged.Faults[0].Name != "slow-receiver" {
			t.Errorf("merge --faults: %+v, %v", merged, err)
		}
	})
}

// A receiver slower than the server's delivery timeout: the server
// abandons the held calls and sends them again after the window; the
// abandoned ones are not deliveries, and the table shows the counters.
func TestNotificationsReceiverFaultOutlastsTimeout(t *testing.T) {
	url := testenv.Server(t, "memory", "--delivery-timeout", "300ms")
	code, out, errs := cli(t, "run", "--scenario", "notifications", "-s", url, "-t", "2", "--rate", "20",
		"--receiver-fault", "at=0.5,duration=1,latency=2s", "--drain", "30s", "-q", "notes-slow", "--max-lost", "0")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	if !strings.Contains(out, "receiver faults: ") || strings.Contains(out, " 0 abandoned") || !strings.Contains(out, "slow-receiver at_unix_ms ") {
		t.Errorf("table without the receiver fault counters (or none abandoned):\n%s", out)
	}
	if !strings.Contains(out, "lost 0  duplicated 0") {
		t.Errorf("delivery line:\n%s", out)
	}
}
