package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// cli runs sluice-bench in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := realMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun runs sluice-bench and fails on a non-zero exit.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, args...)
	if code != 0 {
		t.Fatalf("sluice-bench %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// runJSON runs `sluice-bench run ... --json` and parses the summary.
func runJSON(t *testing.T, args ...string) *result.Result {
	t.Helper()
	out := mustRun(t, append(append([]string{"run"}, args...), "--json")...)
	r, err := result.Parse([]byte(out))
	if err != nil {
		t.Fatalf("parse summary: %v\n%s", err, out)
	}
	return r
}

// stats is what the server says is in a queue.
type stats struct{ Total, Claimed, Free int64 }

// queueStats asks the server (not sluice-bench) for a queue's counts.
func queueStats(t *testing.T, base, queue string) stats {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v2/queues/%s/stats", base, queue), nil)
	req.Header.Set("Client-ID", "5a1f1b2c-0000-4000-8000-00000000beef")
	req.Header.Set("X-Project-ID", "my-lovely-benchmark")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Messages struct {
			Total, Claimed, Free int64
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats %s: status %d err %v", queue, resp.StatusCode, err)
	}
	return stats{doc.Messages.Total, doc.Messages.Claimed, doc.Messages.Free}
}

// serverTotal sums the messages the server holds over n queues.
func serverTotal(t *testing.T, base, prefix string, n int) (total, claimed int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		s := queueStats(t, base, fmt.Sprintf("%s-%d", prefix, i))
		total += s.Total
		claimed += s.Claimed
	}
	return total, claimed
}

// forEachStore runs fn against a fresh sluice-server per store.
func forEachStore(t *testing.T, fn func(t *testing.T, url string)) {
	for _, name := range []string{"memory", "redis"} {
		start := testenv.Stores(t)[name]
		t.Run(name, func(t *testing.T) { fn(t, start(t)) })
	}
}

// writeMessages writes a zaqar-bench message file with two weighted docs.
func writeMessages(t *testing.T) string {
	t.Helper()
	p := t.TempDir() + "/messages.json"
	doc := `[{"weight": 0.7, "doc": {"ttl": 300, "body": {"evt": "small"}}},
	         {"weight": 0.3, "doc": {"ttl": 300, "body": {"evt": "big", "pad": "` + strings.Repeat("y", 900) + `"}}}]`
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(i int) string { return strconv.Itoa(i) }
