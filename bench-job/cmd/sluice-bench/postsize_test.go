package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// A run whose POSTs the queue cannot take stops before its load, saying
// why, and so does its termination log (what a Benchmark's status shows);
// a run that starts sees no post refused as too large. Generated sizes
// straddle the limit, judged by a real sluice-server (the queue's
// _max_messages_post_size, here lowered to 4096 bytes).
func TestPostSizeOverTheQueueLimitStopsTheRun(t *testing.T) {
	const limit = 4096
	url := testenv.Server(t, "memory", "--max-messages-post-size", strconv.Itoa(limit))
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := []int{1, limit - 200, limit, limit + 1, 3 * limit}
	for range 6 {
		sizes = append(sizes, limit-150+rng.IntN(200))
	}
	for i, size := range sizes {
		q := "ps" + strconv.Itoa(i)
		term := filepath.Join(t.TempDir(), "termination-log")
		code, out, errs := cli(t, "run", "-s", url, "--scenario", "custom", "-pw", "2", "-cw", "1", "-ow", "0",
			"-t", "1", "-q", q, "-qno", "1", "--message-size", strconv.Itoa(size), "--json", "--termination-log", term)
		if code != 0 {
			// Refused: said why, before any message was posted.
			if code != exitFailure || !strings.Contains(errs, "_max_messages_post_size") || !strings.Contains(errs, strconv.Itoa(limit)) {
				t.Fatalf("size %d: exit %d, stderr %q", size, code, errs)
			}
			log, err := os.ReadFile(term)
			if err != nil || !strings.Contains(string(log), "_max_messages_post_size") {
				t.Fatalf("size %d: termination log %q (%v)", size, log, err)
			}
			if s := queueStats(t, url, q+"-0"); s.Total != 0 {
				t.Fatalf("size %d: refused run left %d messages", size, s.Total)
			}
			// The refusal is of a size the server would refuse, or within
			// the room the delivery tag's digits take.
			if size < limit-120 {
				t.Fatalf("size %d refused, well under the %d limit: %s", size, limit, errs)
			}
			continue
		}
		r, err := result.Parse([]byte(out))
		if err != nil {
			t.Fatalf("size %d: summary: %v\n%s", size, err, out)
		}
		if n := r.Ops["post"].Errors["http_400"]; n > 0 || r.Ops["post"].OK == 0 {
			t.Fatalf("size %d: the run started and its posts got %d 400s, %d ok\n%s", size, n, r.Ops["post"].OK, out)
		}
	}
}
