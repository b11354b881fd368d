package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// Open loop: every scheduled arrival is either sent or counted as dropped.
func TestOpenLoopAccountsForEveryArrival(t *testing.T) {
	url := testenv.Server(t, "memory")
	r := runJSON(t, "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "2", "--rate", "150", "-q", "open")
	if got := r.Ops["post"].Requests + r.Dropped; got != 300 {
		t.Errorf("requests %d + dropped %d = %d, want 150/s x 2 s = 300", r.Ops["post"].Requests, r.Dropped, got)
	}
	// One worker cannot keep up with an arrival every 10 µs: drops show it.
	r = runJSON(t, "-s", url, "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "1", "--rate", "100000", "-q", "open2")
	if r.Dropped == 0 || r.Ops["post"].Requests+r.Dropped != 100000 {
		t.Errorf("overload: requests %d dropped %d", r.Ops["post"].Requests, r.Dropped)
	}
}

func TestSweepsAndFairness(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		r := runJSON(t, "--scenario", "flood", "-s", url, "-t", "1", "--sweep", "1,4", "-q", "flood")
		if len(r.Steps) != 2 || r.Steps[0].Label != "connections=1" || r.Steps[1].Value != 4 {
			t.Fatalf("flood steps: %+v", r.Steps)
		}
		var posts int64
		for _, s := range r.Steps {
			if s.Messages <= 0 || s.Ops["delete"].OK == 0 {
				t.Errorf("step %s: %.1f messages/s", s.Label, s.Messages)
			}
			posts += s.Ops["post"].OK
		}
		if posts != r.Ops["post"].OK || r.Lost != 0 || r.Duplicated != 0 {
			t.Errorf("flood: steps posted %d, total %d, lost %d dup %d", posts, r.Ops["post"].OK, r.Lost, r.Duplicated)
		}

		r = runJSON(t, "--scenario", "packing", "-s", url, "-t", "1", "--sweep", "0,60", "-pw", "2", "-q", "pack")
		if len(r.Steps) != 2 || r.Steps[1].Ops["post"].Extra["fill_messages"] != 60 || r.Steps[1].Messages <= 0 {
			t.Errorf("packing steps: %+v", r.Steps[1])
		}

		r = runJSON(t, "--scenario", "fairness", "-s", url, "--requests", "300", "--large-message-size", "50000", "-q", "fair")
		small, large := r.Ops["post_small"], r.Ops["post_large"]
		if small.Requests != 300 || small.OK != 300 || large == nil || large.Requests == 0 {
			t.Errorf("fairness: small %+v large %+v", small, large)
		}
	})
}

func TestHTTPBaseline(t *testing.T) {
	url := testenv.Server(t, "memory")
	r := runJSON(t, "--scenario", "http-baseline", "-s", url, "--path", "/v2/ping", "-pw", "2", "-t", "1")
	get := r.Ops["get"]
	if get == nil || get.OK == 0 || get.Failed != 0 {
		t.Errorf("baseline: %+v", get)
	}
}

// Pods started with the same --start-at begin together and their
// termination logs merge (here: two processes against one server).
func TestStartAtAndParallelMerge(t *testing.T) {
	url := testenv.Server(t, "memory")
	at := time.Now().Add(1500 * time.Millisecond)
	dir := t.TempDir()
	type out struct {
		code int
		errs string
	}
	done := make(chan out, 2)
	for i := 0; i < 2; i++ {
		go func() {
			code, _, errs := cli(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "1", "-pw", "2", "-cw", "2",
				"--pod-index", strconv.Itoa(i), "--start-at", at.Format(time.RFC3339Nano),
				"--termination-log", dir+"/tl"+strconv.Itoa(i))
			done <- out{code, errs}
		}()
	}
	for i := 0; i < 2; i++ {
		if o := <-done; o.code != 0 {
			t.Fatalf("pod exit %d: %s", o.code, o.errs)
		}
	}
	m := mustRun(t, "merge", dir+"/tl0", dir+"/tl1")
	r, err := result.Parse([]byte(m))
	if err != nil {
		t.Fatal(err)
	}
	// Processes add up over pods; workers per process stay.
	if r.Pods != 2 || r.Lost != 0 || r.Duplicated != 0 || r.Params.Producer.Processes != 4 || r.Params.Producer.Workers != 2 {
		t.Errorf("merged: pods %d lost %d dup %d params %+v", r.Pods, r.Lost, r.Duplicated, r.Params.Producer)
	}
	if start := time.UnixMilli(r.Start); start.Before(at.Truncate(time.Millisecond)) || start.Sub(at) > 500*time.Millisecond {
		t.Errorf("load started at %v, asked for %v", start, at)
	}
	if !strings.Contains(m, `"scenario": "task-distribution"`) {
		t.Errorf("merged summary lacks scenario")
	}
}

func TestProgressLine(t *testing.T) {
	url := testenv.Server(t, "memory")
	code, _, errs := cli(t, "run", "-s", url, "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "2", "-q", "prog", "--progress", "always")
	if code != 0 || !strings.Contains(errs, "req/s") || !strings.Contains(errs, "errors") {
		t.Errorf("exit %d, progress output %q", code, errs)
	}
	// Not a terminal and not forced: quiet.
	if _, _, errs := cli(t, "run", "-s", url, "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "1", "-q", "prog"); errs != "" {
		t.Errorf("progress written to a non-terminal: %q", errs)
	}
}
