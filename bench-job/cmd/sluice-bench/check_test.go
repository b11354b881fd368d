package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"sluice.dev/bench/internal/load"
)

// TestCheckRefusesWhatARunRefuses: --check answers a usage error for every
// command line a run refuses, and exit 0 for one a run takes, without a
// request to the server.
func TestCheckRefusesWhatARunRefuses(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	t.Setenv(load.AdminTokenEnv, "tok")
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--scenario", "custom", "-pw", "2", "-cw", "2", "-t", "5"}, true},
		{[]string{"--scenario", "flood", "--sweep", "1,2"}, true},
		{[]string{"--move-to-pool", "p2", "-t", "5", "--move-after", "2s"}, true},
		{[]string{"--scenario", "custom", "-pw", "0", "-cw", "0", "-ow", "0"}, false},
		{[]string{"--scenario", "custom", "-qno", "0"}, false},
		{[]string{"--move-to-pool", "p2", "-t", "2", "--move-after", "2s"}, false},
		{[]string{"--scenario", "no-such-scenario"}, false},
		{[]string{"--progress", "sometimes"}, false},
	} {
		args := append([]string{"run", "--check", "-s", srv.URL}, tc.args...)
		code, _, errs := cli(t, args...)
		if want := map[bool]int{true: exitOK, false: exitUsage}[tc.ok]; code != want {
			t.Errorf("%v: exit %d (stderr %s), want %d", tc.args, code, errs, want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("--check sent %d requests to the server, want none", n)
	}
}
