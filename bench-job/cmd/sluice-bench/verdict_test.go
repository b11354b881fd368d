package main

import (
	"strings"
	"testing"

	"sluice.dev/bench/internal/testenv"
)

func TestThresholdsExit99(t *testing.T) {
	url := testenv.Server(t, "memory")
	base := []string{"run", "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "1", "-q", "thr", "--json"}
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		fail  string
	}{
		{"min-rps unreachable", []string{"--min-rps", "1e9"}, exitThreshold, "requests/s"},
		{"max-p99 unreachable", []string{"--max-p99", "0.000001"}, exitThreshold, "p99"},
		{"met", []string{"--min-rps", "1", "--max-p99", "60000"}, exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := cli(t, append(base, tc.flags...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errs)
			}
			if tc.fail != "" && !strings.Contains(errs, tc.fail) {
				t.Errorf("stderr does not name the missed threshold %q: %s", tc.fail, errs)
			}
			if !strings.Contains(out, `"thresholds"`) {
				t.Errorf("summary has no thresholds block")
			}
		})
	}
	// max-lost is judged on delivery verification.
	code, _, errs := cli(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "1", "-pw", "2", "-cw", "2", "-q", "thr2", "--max-lost", "0", "--json")
	if code != exitOK {
		t.Errorf("task distribution with --max-lost 0: exit %d: %s", code, errs)
	}
	// Producing without consuming and without a drain loses everything.
	code, _, errs = cli(t, "run", "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "1", "-q", "thr3", "--verify", "--drain", "0s", "--max-lost", "0", "--json")
	if code != exitThreshold || !strings.Contains(errs, "lost") {
		t.Errorf("unconsumed messages with --max-lost 0: exit %d: %s", code, errs)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-pp", "x"},
		{"--no-such-flag"},
		{"run", "--scenario", "nope"},
		{"run", "-t", "0"},
		{"run", "-cno", "50"},
		{"run", "--start-at", "yesterday"},
		{"run", "-s", "ftp://x"},
		{"report"},
		{"compare", "a"},
		{"merge"},
		{"frobnicate"},
	} {
		if code, _, _ := cli(t, args...); code != exitUsage {
			t.Errorf("sluice-bench %v: exit %d, want 2", args, code)
		}
	}
}

// Unreachable servers, DNS failures and 4xx answers are counted per
// operation with a reason; the run still ends with a summary.
func TestFailuresCountedWithReasons(t *testing.T) {
	closed := testenv.FreePort(t)
	r := runJSON(t, "-s", "http://127.0.0.1:"+itoa(closed), "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "1")
	if n := r.Ops["post"].Errors["connection_refused"]; n == 0 || r.Ops["post"].OK != 0 {
		t.Errorf("refused: errors %v", r.Ops["post"].Errors)
	}
	if r.Ops["queue_setup"] == nil || r.Ops["queue_setup"].Errors["connection_refused"] == 0 {
		t.Errorf("queue setup failures not reported: %v", r.Ops["queue_setup"])
	}
	r = runJSON(t, "-s", "http://sluice-bench-test.invalid:8888", "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "1")
	if r.Ops["post"].Errors["dns"] == 0 {
		t.Errorf("dns: errors %v", r.Ops["post"].Errors)
	}
	url := testenv.Server(t, "memory")
	// A queue name the API rejects: every post is a 400, counted as such.
	r = runJSON(t, "-s", url, "-pp", "1", "-pw", "1", "-cw", "0", "-ow", "0", "-t", "1", "-q", "bad name!")
	if r.Ops["post"].Errors["http_400"] == 0 || r.Ops["post"].OK != 0 {
		t.Errorf("4xx: post %+v", r.Ops["post"])
	}
}

// A bearer token reaches the server; without it every request is a 401,
// counted as such.
func TestTokenAuth(t *testing.T) {
	url := testenv.Server(t, "memory", "--auth-tokens", "s3cret=benchproj")
	r := runJSON(t, "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "1", "-q", "auth", "--token", "s3cret")
	if p := r.Ops["post"]; p.OK == 0 || p.Failed != 0 {
		t.Errorf("with token: %+v", p)
	}
	r = runJSON(t, "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "1", "-q", "auth")
	if p := r.Ops["post"]; p.OK != 0 || p.Errors["http_401"] == 0 {
		t.Errorf("without token: %+v", p)
	}
}
