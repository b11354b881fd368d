package result

import (
	"math"
	"math/rand/v2"
	"testing"

	"sluice.dev/bench/internal/metrics"
)

// outage is a generated fault scenario: a steady rate, failures every 10 ms
// over an interval that starts some time after the fault, a dip in
// successes while they last, a ramp at half rate, then the full rate.
type outage struct {
	at, failFrom, failTo int64 // unix ms
	rate                 int64 // successes per whole second before the fault
	ramp                 int64 // seconds at half rate after the failures
}

func (o outage) series(start, end int64) []metrics.Point {
	var pts []metrics.Point
	lastFailSec := o.failTo / 1000
	for t := start / 1000; t*1000 < end; t++ {
		p := metrics.Point{T: t, N: o.rate}
		for ms := o.failFrom; ms <= o.failTo; ms += 10 {
			if ms/1000 == t {
				kind := "connection_refused"
				if ms-o.failFrom >= (o.failTo-o.failFrom)/2 {
					kind = "http_503"
				}
				p.AddFailures(map[string]int64{kind: 1}, ms, ms)
				p.Err++
			}
		}
		switch {
		case o.failFrom >= 0 && t >= o.failFrom/1000 && t <= lastFailSec:
			p.N = o.rate / 10
		case t > lastFailSec && t <= lastFailSec+o.ramp:
			p.N = o.rate / 2
		}
		pts = append(pts, p)
	}
	return pts
}

// TestAnalyzeFaultsMeasuresGeneratedOutages checks the per-fault figures
// against outages generated with known first failure, window and recovery,
// at any millisecond offset within a second.
func TestAnalyzeFaultsMeasuresGeneratedOutages(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const t0 = 1_700_000_000_000
	for i := range 500 {
		o := outage{at: t0 + 20_000 + r.Int64N(1000), rate: 50 + r.Int64N(5000), ramp: r.Int64N(4)}
		o.failFrom = o.at + r.Int64N(2000)
		o.failTo = o.failFrom + r.Int64N(800)*10
		start, end := int64(t0+r.Int64N(1000)), int64(t0+60_000+r.Int64N(1000))
		res := &Result{Start: start, End: end, Ops: map[string]*OpResult{
			// The same outage seen by two operations sums per second.
			"post": {Series: o.series(start, end)}, "claim": {Series: o.series(start, end)}}}
		got := AnalyzeFaults(res, []Fault{{Name: "kill", At: o.at}})[0]

		if got.FirstError == nil || !near(*got.FirstError, float64(o.failFrom-o.at)/1000) {
			t.Fatalf("case %d %+v: first error %v, want %.3f", i, o, ptr(got.FirstError), float64(o.failFrom-o.at)/1000)
		}
		if !near(got.Unavailable, float64(o.failTo-o.failFrom)/1000) {
			t.Fatalf("case %d %+v: unavailable %.3f, want %.3f", i, o, got.Unavailable, float64(o.failTo-o.failFrom)/1000)
		}
		if !near(got.BaselineRPS, float64(2*o.rate)) {
			t.Fatalf("case %d: baseline %.1f, want %d", i, got.BaselineRPS, 2*o.rate)
		}
		wantRec := float64((o.failTo/1000+1+o.ramp)*1000-o.at) / 1000
		if got.Recovery == nil || !near(*got.Recovery, wantRec) {
			t.Fatalf("case %d %+v: recovery %v, want %.3f", i, o, ptr(got.Recovery), wantRec)
		}
		fails := (o.failTo-o.failFrom)/10 + 1
		if n := got.Errors["connection_refused"] + got.Errors["http_503"]; n != 2*fails {
			t.Fatalf("case %d: %d failures by kind, want %d", i, n, 2*fails)
		}
	}
}

// TestAnalyzeFaultsWithoutFailures: a fault nobody noticed has no first
// error, no unavailability and recovers at once; a service that never
// comes back has no recovery.
func TestAnalyzeFaultsWithoutFailures(t *testing.T) {
	const t0 = 1_700_000_000_000
	steady := outage{at: t0 + 5_500, failFrom: -1, failTo: -2, rate: 100}
	res := &Result{Start: t0, End: t0 + 20_000, Ops: map[string]*OpResult{"post": {Series: steady.series(t0, t0+20_000)}}}
	got := AnalyzeFaults(res, []Fault{{Name: "operator", At: steady.at}})[0]
	if got.FirstError != nil || got.Unavailable != 0 || got.Recovery == nil || *got.Recovery != 0 {
		t.Fatalf("unnoticed fault: %+v", got)
	}

	var dead []metrics.Point
	for s := int64(t0 / 1000); s < (t0+20_000)/1000; s++ {
		p := metrics.Point{T: s, N: 100}
		if s >= (t0+10_000)/1000 {
			p.N = 0
			p.Err = 1
			p.AddFailures(map[string]int64{"timeout": 1}, s*1000+500, s*1000+500)
		}
		dead = append(dead, p)
	}
	res = &Result{Start: t0, End: t0 + 20_000, Ops: map[string]*OpResult{"post": {Series: dead}}}
	got = AnalyzeFaults(res, []Fault{{Name: "shard", At: t0 + 10_000}})[0]
	if got.Recovery != nil || got.FirstError == nil || *got.FirstError != 0.5 || got.Errors["timeout"] != 10 {
		t.Fatalf("permanent outage: %+v", got)
	}
}

// TestAnalyzeFaultsSplitsWindows: two faults each get the failures of
// their own window, and the second's baseline does not reach back into the
// first's.
func TestAnalyzeFaultsSplitsWindows(t *testing.T) {
	const t0 = 1_700_000_000_000
	var pts []metrics.Point
	for s := int64(t0 / 1000); s < (t0+40_000)/1000; s++ {
		p := metrics.Point{T: s, N: 1000}
		if off := s - t0/1000; off == 10 || off == 30 {
			p.N, p.Err = 0, 2
			p.AddFailures(map[string]int64{"http_503": 2}, s*1000+100, s*1000+900)
		}
		pts = append(pts, p)
	}
	res := &Result{Start: t0, End: t0 + 40_000, Ops: map[string]*OpResult{"post": {Series: pts}}}
	got := AnalyzeFaults(res, []Fault{{Name: "b", At: t0 + 30_000}, {Name: "a", At: t0 + 10_000}})
	if got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("not in time order: %s, %s", got[0].Name, got[1].Name)
	}
	for _, g := range got {
		if g.Errors["http_503"] != 2 || !near(g.Unavailable, 0.8) || g.Recovery == nil || !near(*g.Recovery, 1) || g.BaselineRPS != 1000 {
			t.Fatalf("%s: %+v recovery %v", g.Name, g, ptr(g.Recovery))
		}
	}
}

// TestAnalyzeFaultsBoundarySecond: in the second where one fault's window
// ends and the next begins, failures count only in the window they fell
// in, whichever side of the boundary they are on.
func TestAnalyzeFaultsBoundarySecond(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const t0 = 1_700_000_000_000
	for i := range 300 {
		a := int64(t0 + 10_000 + r.Int64N(1000))
		b := int64(t0+20_000) + 1 + r.Int64N(998) // leaves room on both sides in its second
		sec := b / 1000
		// One burst in b's second, all before b (a's outage lasting) or all
		// at or after it (b's outage starting).
		var first, last int64
		after := r.IntN(2) == 0
		if after {
			first = b + r.Int64N(sec*1000+1000-b)
			last = first + r.Int64N(sec*1000+1000-first)
		} else {
			first = sec*1000 + r.Int64N(b-sec*1000)
			last = first + r.Int64N(b-first)
		}
		n := 1 + r.Int64N(5)
		var pts []metrics.Point
		for s := int64(t0 / 1000); s < (t0+40_000)/1000; s++ {
			p := metrics.Point{T: s, N: 100}
			if s == sec {
				p.Err = n
				p.AddFailures(map[string]int64{"eof": n}, first, last)
			}
			pts = append(pts, p)
		}
		res := &Result{Start: t0, End: t0 + 40_000, Ops: map[string]*OpResult{"post": {Series: pts}}}
		got := AnalyzeFaults(res, []Fault{{Name: "a", At: a}, {Name: "b", At: b}})
		wantA, wantB := n, int64(0)
		if after {
			wantA, wantB = 0, n
		}
		if got[0].Errors["eof"] != wantA || got[1].Errors["eof"] != wantB {
			t.Fatalf("case %d: failures %d-%d, boundary %d: a counted %d (want %d), b %d (want %d)",
				i, first, last, b, got[0].Errors["eof"], wantA, got[1].Errors["eof"], wantB)
		}
		if (got[1].FirstError != nil) != after {
			t.Fatalf("case %d: b's first error %v with failures after the boundary %v", i, ptr(got[1].FirstError), after)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func ptr(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestVerdictBoundsFaults: the unavailability and recovery thresholds hold
// for every fault, and a fault never recovered from misses any recovery
// bound.
func TestVerdictBoundsFaults(t *testing.T) {
	one, three := 1.0, 3.0
	r := &Result{Faults: []FaultResult{
		{Fault: Fault{Name: "server"}, Unavailable: 0.5, Recovery: &one},
		{Fault: Fault{Name: "shard"}, Unavailable: 2.5, Recovery: &three},
		{Fault: Fault{Name: "catalog"}, Unavailable: 0},
	}}
	for _, c := range []struct {
		unavail, recovery float64
		failures          int
	}{{3, -1, 0}, {2, -1, 1}, {0.4, -1, 2}, {-1, 5, 1}, {-1, 2, 2}, {1, 2, 3}} {
		v := &Verdict{}
		if c.unavail >= 0 {
			v.MaxUnavailable = &c.unavail
		}
		if c.recovery >= 0 {
			v.MaxRecovery = &c.recovery
		}
		if !v.Any() {
			t.Fatal("fault thresholds not counted as thresholds")
		}
		v.Check(r)
		if len(v.Failures) != c.failures || v.Pass != (c.failures == 0) {
			t.Errorf("unavailable <= %v, recovery <= %v: %v", c.unavail, c.recovery, v.Failures)
		}
	}
}

// TestRedeliveredSurvivesTheTerminationLog: the count reaches a Benchmark's
// status through the compact summary and its merge.
func TestRedeliveredSurvivesTheTerminationLog(t *testing.T) {
	r := &Result{Scenario: "task-distribution", Pods: 1, Start: 1000, End: 3000, Ops: map[string]*OpResult{},
		Delivery: &Delivery{Produced: 10, Consumed: 12, Unique: 10, Redelivered: 2, E2E: &OpResult{}}}
	if err := r.Summarize(); err != nil {
		t.Fatal(err)
	}
	raw, err := r.TermLog()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse(raw)
	m, err := Merge([]*Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if st := StatusOf(m, nil, true); st.Results.Redelivered != 4 {
		t.Fatalf("redelivered %d after merging two pods of 2, want 4", st.Results.Redelivered)
	}
}
