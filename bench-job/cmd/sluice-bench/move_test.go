package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sluice.dev/bench/internal/load"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

const moveAdminToken = "move-admin-token"

// pooledServer starts sluice-server over a Redis catalog with two Redis
// pools: "p1" takes every new queue, "p2" none (weight 0) until queues
// move there; "down" is registered (forced) on an address nothing serves.
func pooledServer(t *testing.T) string {
	t.Helper()
	catalog := testenv.Redis(t)
	url := testenv.Server(t, "memory", "--catalog", "redis://"+catalog+"/0", "--admin-token", moveAdminToken)
	for _, p := range []struct{ name, body string }{
		{"p1", `{"weight": 100, "uri": "redis://` + testenv.Redis(t) + `/0"}`},
		{"p2", `{"weight": 0, "uri": "redis://` + testenv.Redis(t) + `/0"}`},
		{"down?force=true", `{"weight": 0, "uri": "redis://127.0.0.1:1/0"}`},
	} {
		if st, body := adminCall(t, url, "PUT", "/v2/pools/"+p.name, p.body); st != 201 {
			t.Fatalf("register pool %s: %d %s", p.name, st, body)
		}
	}
	return url
}

// adminCall sends one admin request in the benchmark's project.
func adminCall(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Client-ID", "5a1f1b2c-0000-4000-8000-00000000beef")
	req.Header.Set("X-Project-ID", "my-lovely-benchmark")
	req.Header.Set("Authorization", "Bearer "+moveAdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(resp))
	return resp.StatusCode, b.String()
}

func readAll(resp *http.Response) string {
	var m json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return string(m)
}

// TestMoveDuringTaskDistribution moves both queues of a task-distribution
// run from p1 to p2 two seconds into the load, with producers outpacing
// the consumer (one, claiming one message at a time) so there is a backlog
// to move: while the move seals the source, posts wait and the consumer
// keeps claiming from it. The server confirms the moves;
// the delivery check, which spans the move, finds nothing lost or
// duplicated, and the claims (300 s) never expire during the run.
func TestMoveDuringTaskDistribution(t *testing.T) {
	url := pooledServer(t)
	t.Setenv(load.AdminTokenEnv, moveAdminToken)
	r := runJSON(t, "--scenario", "task-distribution", "-s", url, "-t", "5", "-pp", "1", "-pw", "8", "-cp", "1", "-cw", "1", "-cno", "1",
		"-qno", "2", "-q", "mv", "--move-to-pool", "p2", "--move-after", "2s", "--max-lost", "0")
	m := r.Move
	if m == nil {
		t.Fatal("summary has no move block")
	}
	if m.State != result.MoveDone || m.Pool != "p2" || m.Queues != 2 || m.Error != "" {
		t.Fatalf("move %+v", *m)
	}
	if m.Moved <= 0 || m.Duration <= 0 || m.End < m.Start || m.Start < r.Start+2000 {
		t.Errorf("move %+v (load started %d): want messages moved, a duration, a start 2 s into the load", *m, r.Start)
	}
	if m.P99Before <= 0 || m.P99During <= 0 {
		t.Errorf("latencies before/during the move: %v / %v ms", m.P99Before, m.P99During)
	}
	var moved int64
	for i := 0; i < 2; i++ {
		st, body := adminCall(t, url, "GET", fmt.Sprintf("/v2/queues/mv-%d/migrate", i), "")
		var got struct {
			To, State string
			Moved     int64 `json:"messages_moved"`
		}
		if err := json.Unmarshal([]byte(body), &got); st != 200 || err != nil || got.To != "p2" || got.State != "done" {
			t.Errorf("server's record of mv-%d: %d %s", i, st, body)
		}
		moved += got.Moved
	}
	if moved != m.Moved {
		t.Errorf("sluice-bench reports %d messages moved, the server %d", m.Moved, moved)
	}
	d := r.Delivery
	if d == nil || d.Produced == 0 || d.Lost != 0 || d.Duplicated != 0 || d.Redelivered != 0 {
		t.Fatalf("delivery across the move: %+v", d)
	}
	if r.Verdict == nil || !r.Verdict.Pass {
		t.Errorf("verdict %+v", r.Verdict)
	}
	if total, _ := serverTotal(t, url, "mv", 2); total != 0 {
		t.Errorf("%d messages left on the server after the drain", total)
	}
}

// TestMoveThatFailsFailsTheRun: a move the server refuses or cannot carry
// out fails the verdict (exit 99) with the reason, and the load's delivery
// check still holds.
func TestMoveThatFailsFailsTheRun(t *testing.T) {
	url := pooledServer(t)
	t.Setenv(load.AdminTokenEnv, moveAdminToken)
	for _, tc := range []struct{ pool, state, why string }{
		{"nope", "failed", "pool nope is not registered"},
		{"down", "failed", "POST"},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			code, out, errs := cli(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "2", "-pw", "2", "-cw", "2", "-qno", "1",
				"-q", "mvf-"+tc.pool, "--move-to-pool", tc.pool, "--move-after", "500ms", "--json")
			if code != exitThreshold {
				t.Fatalf("exit %d, want %d\nstderr %s", code, exitThreshold, errs)
			}
			r, err := result.Parse([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			if r.Move == nil || r.Move.State != tc.state || !strings.Contains(r.Move.Error, tc.why) {
				t.Fatalf("move %+v, want state %s mentioning %q", r.Move, tc.state, tc.why)
			}
			want := "queue move to pool " + tc.pool + " did not finish"
			if !strings.Contains(errs, want) || r.Verdict == nil || r.Verdict.Pass {
				t.Errorf("verdict %+v, stderr %s: want a failure naming %q", r.Verdict, errs, want)
			}
			if d := r.Delivery; d == nil || d.Produced == 0 || d.Lost != 0 || d.Duplicated != 0 {
				t.Errorf("delivery %+v", d)
			}
		})
	}
	// The table says it too.
	code, out, _ := cli(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "1", "-pw", "1", "-cw", "1", "-qno", "1",
		"-q", "mvf-table", "--move-to-pool", "nope", "--move-after", "0s")
	if code != exitThreshold || !strings.Contains(out, "move to pool nope: failed, 1 queues") || !strings.Contains(out, "move error: POST mvf-table-0/migrate: 400") {
		t.Errorf("table output (exit %d):\n%s", code, out)
	}
}

// TestMoveUsageErrors: a move that cannot be asked for is a usage error
// before any load.
func TestMoveUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--move-to-pool", "p2"}, load.AdminTokenEnv},
		{"tok", []string{"--move-to-pool", "p2", "-t", "2", "--move-after", "2s"}, "must fall within the load"},
		{"tok", []string{"--move-to-pool", "p2", "--move-after", "-1s"}, "must fall within the load"},
		{"tok", []string{"--move-to-pool", "p2", "--move-timeout", "0s"}, "--move-timeout"},
		{"tok", []string{"--move-to-pool", "p2", "--token", "t"}, "--project-id"},
		{"tok", []string{"--move-to-pool", "p2", "--scenario", "flood"}, "timed load"},
	} {
		t.Setenv(load.AdminTokenEnv, tc.env)
		code, _, errs := cli(t, append([]string{"run", "-s", "http://127.0.0.1:1"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v with token %q: exit %d, stderr %s; want 2 mentioning %q", tc.args, tc.env, code, errs, tc.want)
		}
	}
}
