package result

import (
	"math/rand/v2"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

var moveStates = []string{MoveDone, MoveDone, "failed", "unfinished", "not_started"}

// randomMove is one pod's move with random figures.
func randomMove(rng *rand.Rand) *Move {
	start := 1_000_000 + rng.Int64N(5000)
	m := &Move{Pool: "p2", Queues: 1 + rng.IntN(4), State: moveStates[rng.IntN(len(moveStates))],
		Moved: rng.Int64N(10000), Start: start, End: start + rng.Int64N(8000),
		P99Before: float64(rng.IntN(50)), P99During: float64(rng.IntN(90))}
	if m.State != MoveDone {
		m.Error = "queue q" + string(rune('a'+rng.IntN(26))) + ": backend down"
	}
	m.Duration = float64(m.End-m.Start) / 1000
	return m
}

// TestMovesMergeThroughTerminationLogs: pods' moves survive the
// termination log, and their merge (as the operator's `merge --status`
// does) adds counts, keeps the worst latencies and fails the verdict, with
// the pods' reasons, exactly when one pod's move did not finish.
func TestMovesMergeThroughTerminationLogs(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	for i := 0; i < 200; i++ {
		n := 1 + rng.IntN(4)
		var rs []*Result
		var queues int
		var moved int64
		var worstBefore, worstDuring float64
		allDone := true
		var reasons []string
		for p := 0; p < n; p++ {
			m := randomMove(rng)
			queues, moved = queues+m.Queues, moved+m.Moved
			worstBefore, worstDuring = max(worstBefore, m.P99Before), max(worstDuring, m.P99During)
			if m.State != MoveDone {
				allDone = false
				reasons = append(reasons, m.Error)
			}
			r := &Result{Scenario: "task-distribution", Start: 1000, End: 9000, Ops: map[string]*OpResult{"post": op(randSamples(50, 900), 0)}, Move: m}
			if err := r.Summarize(); err != nil {
				t.Fatal(err)
			}
			b, err := r.TermLog()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if *back.Move != *m {
				t.Fatalf("termination log changed the move: %+v -> %+v", *m, *back.Move)
			}
			rs = append(rs, back)
		}
		merged, err := Merge(rs)
		if err != nil {
			t.Fatal(err)
		}
		st := StatusOf(merged, nil, true)
		sm := st.Results.Move
		if sm == nil || sm.Queues != queues || sm.MessagesMoved != moved || sm.P99BeforeMs != worstBefore || sm.P99DuringMs != worstDuring {
			t.Fatalf("case %d: merged move %+v; want %d queues, %d moved, p99 %v/%v", i, sm, queues, moved, worstBefore, worstDuring)
		}
		if (sm.State == MoveDone) != allDone || (st.Verdict == "Pass") != allDone {
			t.Fatalf("case %d: state %s, verdict %s; every pod done: %v", i, sm.State, st.Verdict, allDone)
		}
		for _, why := range reasons {
			if !strings.Contains(sm.Error, why) || !strings.Contains(strings.Join(st.VerdictReasons, "\n"), "did not finish") {
				t.Fatalf("case %d: reason %q missing from %q / %v", i, why, sm.Error, st.VerdictReasons)
			}
		}
	}
}

// TestMoveLatencySplitsSeconds: seconds wholly before the move count as
// before, seconds the move overlapped as during, later ones not at all.
func TestMoveLatencySplitsSeconds(t *testing.T) {
	point := func(sec int64, us int64) metrics.Point {
		h := metrics.NewHist()
		for i := 0; i < 100; i++ {
			metrics.RecordMicros(h, us)
		}
		enc, _ := h.Encode(hdr.V2CompressedEncodingCookieBase)
		return metrics.Point{T: sec, N: 100, Hist: string(enc)}
	}
	r := &Result{Start: 100_000, Ops: map[string]*OpResult{
		"post":  {Series: []metrics.Point{point(100, 1000), point(101, 1000), point(102, 9000), point(104, 50000)}},
		"claim": {Series: []metrics.Point{point(101, 2000), point(103, 7000)}},
	}}
	// The move runs 102.5 s .. 103.2 s: seconds 100-101 before, 102-103 during, 104 after.
	before, during := MoveLatency(r, 102_500, 103_200)
	if before < 1.99 || before > 2.01 || during < 8.99 || during > 9.01 {
		t.Errorf("p99 before %v ms (want 2), during %v ms (want 9)", before, during)
	}
	if b, d := MoveLatency(&Result{Start: 0, Ops: map[string]*OpResult{}}, 1, 2); b != 0 || d != 0 {
		t.Errorf("no samples: %v %v", b, d)
	}
}
