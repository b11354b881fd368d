package result

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"sluice.dev/bench/internal/metrics"
)

// op builds an operation from explicit latency samples (µs).
func op(samples []int64, errs int64) *OpResult {
	h := metrics.NewHist()
	for _, s := range samples {
		metrics.RecordMicros(h, s)
	}
	return &OpResult{Requests: int64(len(samples)) + errs, OK: int64(len(samples)), Errors: map[string]int64{"http_503": errs}, h: h}
}

func randSamples(n int, scale int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 1 + rand.Int64N(scale)
	}
	return out
}

func TestMergeEqualsUnion(t *testing.T) {
	a, b := randSamples(5000, 20000), randSamples(7000, 90000)
	ra := &Result{Scenario: "s", Start: 1000, End: 11000, Ops: map[string]*OpResult{"post": op(a, 2)}}
	rb := &Result{Scenario: "s", Start: 1500, End: 12000, Ops: map[string]*OpResult{"post": op(b, 3)}}
	for _, r := range []*Result{ra, rb} {
		if err := r.Summarize(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Merge([]*Result{ra, rb})
	if err != nil {
		t.Fatal(err)
	}
	union := op(append(append([]int64{}, a...), b...), 5)
	if err := union.summarize(11); err != nil {
		t.Fatal(err)
	}
	got := m.Ops["post"]
	if got.OK != 12000 || got.Requests != 12005 || got.Errors["http_503"] != 5 || m.Duration != 11 {
		t.Errorf("merged counts %+v duration %v", got, m.Duration)
	}
	if got.P50 != union.P50 || got.P99 != union.P99 || got.P999 != union.P999 || got.Max != union.Max || got.Mean != union.Mean {
		t.Errorf("merged %v/%v/%v/%v, union %v/%v/%v/%v", got.P50, got.P99, got.P999, got.Max, union.P50, union.P99, union.P999, union.Max)
	}
	if _, err := Merge([]*Result{ra, {Scenario: "other"}}); err == nil {
		t.Error("merged different scenarios")
	}
}

func TestDeliveryMergeAcrossPods(t *testing.T) {
	// Pod A produced 0..99, pod B 0..49 (its own origin). A claimed 0..59 of
	// its own and B's 0..9; B claimed A's 50..99 (50..59 a second time).
	bits := func(lo, hi int64) *metrics.Bitset {
		b := &metrics.Bitset{}
		for i := lo; i < hi; i++ {
			b.Set(i)
		}
		return b
	}
	pa := &Delivery{Consumed: 70, ProducedBits: map[string]string{"A": bits(0, 100).Encode()},
		SeenBits: map[string]string{"A": bits(0, 60).Encode(), "B": bits(0, 10).Encode()}, E2E: &OpResult{}}
	pb := &Delivery{Consumed: 50, ProducedBits: map[string]string{"B": bits(0, 50).Encode()},
		SeenBits: map[string]string{"A": bits(50, 100).Encode()}, E2E: &OpResult{}}
	m, err := Merge([]*Result{{Scenario: "s", Delivery: pa, Ops: map[string]*OpResult{}}, {Scenario: "s", Delivery: pb, Ops: map[string]*OpResult{}}})
	if err != nil {
		t.Fatal(err)
	}
	d := m.Delivery
	if d.Produced != 150 || d.Unique != 110 || d.Lost != 40 || d.Duplicated != 10 || d.Consumed != 120 || !d.Exact {
		t.Errorf("delivery %+v", d)
	}
}

func TestTermLogFitsAndRoundTrips(t *testing.T) {
	r := &Result{Scenario: "auditing", Start: 1, End: 10001, Ops: map[string]*OpResult{}}
	for _, n := range []string{"post", "claim", "delete", "list"} {
		r.Ops[n] = op(randSamples(20000, 5_000_000), 1)
	}
	for i := 0; i < 12; i++ {
		r.Steps = append(r.Steps, &Step{Label: "connections=1", Value: 1, Start: 1, End: 2,
			Ops: map[string]*OpResult{"post": op(randSamples(100, 1000), 0), "claim": op(randSamples(100, 1000), 0), "delete": op(randSamples(100, 1000), 0)}})
	}
	if err := r.Summarize(); err != nil {
		t.Fatal(err)
	}
	b, err := r.TermLog()
	if err != nil || len(b) > TermLogLimit {
		t.Fatalf("termination log %d bytes: %v", len(b), err)
	}
	var c Compact
	if err := json.Unmarshal(b, &c); err != nil || len(c.Trunc) == 0 {
		t.Fatalf("compact: %v trunc %v", err, c.Trunc)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Summarize(); err != nil {
		t.Fatal(err)
	}
	for n, o := range r.Ops {
		g := back.Ops[n]
		if g.OK != o.OK || g.Requests != o.Requests {
			t.Errorf("%s counts %d/%d vs %d/%d", n, g.Requests, g.OK, o.Requests, o.OK)
		}
		if d := g.P99 - o.P99; d > o.P99*0.011 || -d > o.P99*0.011 {
			t.Errorf("%s p99 %v vs %v", n, g.P99, o.P99)
		}
	}
}

func TestThresholdVerdict(t *testing.T) {
	r := &Result{Scenario: "s", Start: 0, End: 1000, Ops: map[string]*OpResult{"post": op([]int64{1000, 2000, 50000}, 0)},
		Delivery: &Delivery{Lost: 3, E2E: &OpResult{}}}
	if err := r.Summarize(); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	v := &Verdict{MinRPS: 2, MaxP99: 10, MaxLost: &zero}
	v.Check(r)
	if v.Pass || len(v.Failures) != 2 { // rps 3 >= 2 passes; p99 50 ms and lost 3 fail
		t.Errorf("verdict %+v", v)
	}
	// A loss threshold over a run that acknowledged no post fails: nothing
	// was verified. One that acknowledged some and lost none passes it.
	for _, tc := range []struct {
		d    *Delivery
		pass bool
	}{{nil, false}, {&Delivery{E2E: &OpResult{}}, false}, {&Delivery{Produced: 5, Consumed: 5, Unique: 5, E2E: &OpResult{}}, true}} {
		r.Delivery = tc.d
		v := &Verdict{MaxLost: &zero}
		v.Check(r)
		if v.Pass != tc.pass || !tc.pass && !strings.Contains(strings.Join(v.Failures, ""), "no post was acknowledged") {
			t.Errorf("delivery %+v: verdict %+v", tc.d, v)
		}
	}
}

// Generated results: with no threshold set, the verdict fails exactly when
// an operation sent requests and none succeeded (a run that measured only
// its own failure: a wrong token, a message the queue refuses, a target
// down the whole run), naming each such operation and its errors.
func TestVerdictFailsAnOperationThatNeverSucceeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	names := []string{"post", "claim", "delete", "list", "queue_setup"}
	for c := range 300 {
		r := &Result{Scenario: "s", Start: 0, End: 1000, Ops: map[string]*OpResult{}}
		var dead []string
		for _, n := range names {
			if rng.IntN(3) == 0 {
				continue
			}
			req := int64(rng.IntN(4))
			ok := req
			if req > 0 && rng.IntN(3) == 0 {
				ok = int64(rng.IntN(int(req)))
			}
			o := &OpResult{Requests: req, OK: ok, Failed: req - ok, Errors: map[string]int64{}}
			if req > ok {
				o.Errors["http_400"] = req - ok
			}
			if req > 0 && ok == 0 {
				dead = append(dead, n)
			}
			r.Ops[n] = o
		}
		v := &Verdict{}
		v.Check(r)
		if v.Pass != (len(dead) == 0) {
			t.Fatalf("case %d: ops %v dead %v: verdict %+v", c, r.Ops, dead, v)
		}
		sort.Strings(dead)
		if len(v.Failures) != len(dead) {
			t.Fatalf("case %d: failures %q for dead %v", c, v.Failures, dead)
		}
		for i, n := range dead {
			want := fmt.Sprintf("%s: none of %d requests succeeded (http_400 %d)", n, r.Ops[n].Requests, r.Ops[n].Requests)
			if v.Failures[i] != want {
				t.Fatalf("case %d: failure %q, want %q", c, v.Failures[i], want)
			}
		}
	}
}
