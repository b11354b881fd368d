package result

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"sluice.dev/bench/internal/metrics"
)

// bitsOf is a bitset holding seq.
func bitsOf(seq ...int64) *metrics.Bitset {
	b := &metrics.Bitset{}
	for _, i := range seq {
		b.Set(i)
	}
	return b
}

func encodeAll(m map[string]*metrics.Bitset) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, b := range m {
		out[k] = b.Encode()
	}
	return out
}

// podLog is one pod's termination log as sluice-bench writes it, without
// histograms (as when a log had to shed them): post 4 requests, 3 ok.
// produced nil means the log shed its bitsets.
func podLog(t *testing.T, start, end int64, produced, seen map[string]*metrics.Bitset, d CompactDelivery) *Result {
	t.Helper()
	d.PB, d.SB = encodeAll(produced), encodeAll(seen)
	c := &Compact{V: Version, Scenario: "task-distribution", Pods: 1, Start: start, End: end, Roles: [6]int{1, 2, 1, 2, 0, 0},
		Ops: map[string]CompactOp{"post": {N: 4, OK: 3, Err: map[string]int64{"http_503": 1}, P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}},
		D:   &d}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mergeStatus(t *testing.T, v *Verdict, ownQueues bool, rs ...*Result) (*Result, Status) {
	t.Helper()
	m, err := Merge(rs)
	if err != nil {
		t.Fatal(err)
	}
	return m, StatusOf(m, v, ownQueues)
}

func TestStatusCountsAMessageClaimedByTwoPodsAsDuplicateAndUnclaimedAsLost(t *testing.T) {
	// Origin A produced 0..4 (pod 1); pod 1 claimed 0,1; pod 2 claimed 1,2 (shared queues).
	a := podLog(t, 1000, 3000, map[string]*metrics.Bitset{"A": bitsOf(0, 1, 2, 3, 4)}, map[string]*metrics.Bitset{"A": bitsOf(0, 1)}, CompactDelivery{C: 2})
	b := podLog(t, 1500, 4000, map[string]*metrics.Bitset{"B": bitsOf()}, map[string]*metrics.Bitset{"A": bitsOf(1, 2)}, CompactDelivery{C: 2, Dup: 1})
	m, st := mergeStatus(t, nil, false, a, b)
	r := st.Results
	if r.Produced != 5 || r.Consumed != 4 || m.Delivery.Unique != 3 || r.Lost != 2 || r.Duplicated != 2 || !r.Exact {
		t.Errorf("delivery %+v (unique %d)", r, m.Delivery.Unique)
	}
	if r.DurationSeconds != 3 || r.Pods != 2 {
		t.Errorf("window %v s over %d pods", r.DurationSeconds, r.Pods)
	}
	// No histogram in the logs: approximated from the percentiles, counters summed.
	post := r.Operations["post"]
	if post.Requests != 8 || post.Errors != 2 || m.Ops["post"].Errors["http_503"] != 2 {
		t.Errorf("post %+v errors %v", post, m.Ops["post"].Errors)
	}
	if post.RequestsPerSecond != 2 || post.P99Ms < 2 || post.P99Ms > 5.1 {
		t.Errorf("post rate %v p99 %v", post.RequestsPerSecond, post.P99Ms)
	}
	if st.Verdict != "Pass" || len(st.VerdictReasons) != 1 || st.VerdictReasons[0] != "no thresholds set" {
		t.Errorf("verdict %s %v", st.Verdict, st.VerdictReasons)
	}
}

func TestStatusWithoutBitsetsSumsThePodsCountsExactOnlyWithOwnQueues(t *testing.T) {
	a := podLog(t, 0, 1000, map[string]*metrics.Bitset{"A": bitsOf(0)}, map[string]*metrics.Bitset{"A": bitsOf(0)}, CompactDelivery{C: 1, P: 1, U: 1})
	b := podLog(t, 0, 1000, nil, nil, CompactDelivery{C: 3, P: 4, Lost: 1, U: 3})
	_, st := mergeStatus(t, nil, false, a, b)
	if r := st.Results; r.Produced != 5 || r.Lost != 1 || r.Consumed != 4 || r.Exact {
		t.Errorf("shared queues: %+v", r)
	}
	_, st = mergeStatus(t, nil, true, a, b)
	if r := st.Results; r.Produced != 5 || r.Lost != 1 || r.Consumed != 4 || !r.Exact {
		t.Errorf("own queues: %+v", r)
	}
}

func TestStatusKeepsWhatTheLogsShed(t *testing.T) {
	a := podLog(t, 0, 1000, nil, nil, CompactDelivery{})
	a.Truncated = []string{"hist", "bitsets"}
	b := podLog(t, 0, 1000, nil, nil, CompactDelivery{})
	b.Truncated = []string{"e2e_hist", "bitsets"}
	_, st := mergeStatus(t, nil, false, a, b)
	if got := strings.Join(st.Results.Truncated, ","); got != "bitsets,e2e_hist,hist" {
		t.Errorf("truncated %q", got)
	}
}

func TestBadInputsAreRefused(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"not json", "not a sluice-bench summary"},
		{`{"v": 2, "ops": {}}`, "not a sluice-bench v1 summary"},
		{`{"v": 1}`, "not a sluice-bench v1 summary"},
		{`{"nothing": 1}`, "no version field"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s): %v, want %q", tc.in, err, tc.want)
		}
	}
	broken := podLog(t, 0, 1, nil, nil, CompactDelivery{})
	broken.Delivery.ProducedBits = map[string]string{"A": "!!"}
	ok := podLog(t, 0, 1, map[string]*metrics.Bitset{"A": bitsOf(1)}, nil, CompactDelivery{})
	if _, err := Merge([]*Result{ok, broken}); err == nil || !strings.Contains(err.Error(), "bitset of origin A") {
		t.Errorf("merged an undecodable bitset: %v", err)
	}
	if _, err := Merge(nil); err == nil {
		t.Error("merged nothing")
	}
}

func TestVerdictReasonsHaveOneWording(t *testing.T) {
	lossy := podLog(t, 0, 1000, map[string]*metrics.Bitset{"A": bitsOf(0, 1, 2)}, map[string]*metrics.Bitset{"A": bitsOf(0)}, CompactDelivery{C: 1})
	zero := int64(0)
	_, st := mergeStatus(t, &Verdict{MinRPS: 2000, MaxP99: 1, MaxLost: &zero}, false, lossy)
	// Three samples (approximated: 1, 2 and 5 ms): the worst is the p99.
	p99 := st.Results.P99Ms
	want := []string{"requests/s 3.0 < minimum 2000.0", fmt.Sprintf("p99 %.3f ms > maximum 1.000 ms", p99), "lost 2 > maximum 0"}
	if st.Verdict != "Fail" || strings.Join(st.VerdictReasons, "|") != strings.Join(want, "|") || p99 < 4.9 || p99 > 5.1 {
		t.Errorf("verdict %s %q (p99 %v)", st.Verdict, st.VerdictReasons, p99)
	}
	if want := fmt.Sprintf("3.0 req/s, p99 %.3f ms, lost 2, duplicated 0: Fail", p99); st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	_, st = mergeStatus(t, &Verdict{MinRPS: 1, MaxP99: 60000}, false, lossy)
	if st.Verdict != "Pass" || st.VerdictReasons[0] != "all thresholds met" {
		t.Errorf("met: %s %v", st.Verdict, st.VerdictReasons)
	}
}

// TestStatusDeliveryMatchesAModel checks merged delivery counts against a
// direct count over generated pods that share one queue set: every
// produced message claimed by nobody is lost, every extra claim of one
// message is a duplicate.
func TestStatusDeliveryMatchesAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	for round := 0; round < 200; round++ {
		pods := 1 + rng.IntN(4)
		produced := make([]map[string]*metrics.Bitset, pods)
		seen := make([]map[string]*metrics.Bitset, pods)
		claims := map[string]map[int64]int{} // origin -> seq -> claims
		made := map[string]map[int64]bool{}
		for p := range pods {
			origin := string(rune('A' + p))
			n := int64(rng.IntN(200))
			produced[p] = map[string]*metrics.Bitset{origin: {}}
			made[origin] = map[int64]bool{}
			for i := range n {
				produced[p][origin].Set(i)
				made[origin][i] = true
			}
			seen[p] = map[string]*metrics.Bitset{}
		}
		for p := range pods {
			for o := range pods {
				origin := string(rune('A' + o))
				for i := range int64(len(made[origin]) + 5) { // a few claims of unknown messages too
					if rng.IntN(3) != 0 {
						continue
					}
					if seen[p][origin] == nil {
						seen[p][origin] = &metrics.Bitset{}
					}
					seen[p][origin].Set(i)
					if claims[origin] == nil {
						claims[origin] = map[int64]int{}
					}
					claims[origin][i]++
				}
			}
		}
		var rs []*Result
		var consumed int64
		for p := range pods {
			var c int64
			for _, b := range seen[p] {
				c += b.Count()
			}
			consumed += c
			rs = append(rs, podLog(t, 0, 1000, produced[p], seen[p], CompactDelivery{C: c}))
		}
		var wantProduced, wantLost, wantDup int64
		for origin, seqs := range made {
			for i := range seqs {
				wantProduced++
				if claims[origin][i] == 0 {
					wantLost++
				}
			}
		}
		for _, seqs := range claims {
			for _, n := range seqs {
				wantDup += int64(max(0, n-1))
			}
		}
		_, st := mergeStatus(t, nil, false, rs...)
		r := st.Results
		if r.Produced != wantProduced || r.Lost != wantLost || r.Duplicated != wantDup || r.Consumed != consumed || !r.Exact {
			t.Fatalf("round %d (%d pods): got produced %d lost %d dup %d consumed %d exact %v; want %d %d %d %d",
				round, pods, r.Produced, r.Lost, r.Duplicated, r.Consumed, r.Exact, wantProduced, wantLost, wantDup, consumed)
		}
	}
}

// The verdict's reasons quote the figures the status reports: a reason
// formats the rounded requestsPerSecond and p99Ms, so the two never
// disagree in the last digit shown (a rate of x.x4996 is reported as
// x.x5 and quoted as x.x5, not x.x4). Rates and latencies are generated
// around every rounding boundary.
func TestVerdictReasonsQuoteTheReportedFigures(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 3))
	for range 2000 {
		rps := float64(rng.IntN(100000)) + float64(rng.IntN(10))/10 + 0.05 + (rng.Float64()-0.5)*1e-3
		p99 := float64(rng.IntN(1000)) + float64(rng.IntN(1000))/1000 + 0.0005 + (rng.Float64()-0.5)*1e-5
		st := StatusOf(&Result{Total: &Totals{ReqsPerSec: rps, P99: p99}}, &Verdict{MinRPS: 1e9, MaxP99: 1e-4}, false)
		want := []string{fmt.Sprintf("requests/s %.1f < minimum 1000000000.0", st.Results.RequestsPerSecond),
			fmt.Sprintf("p99 %.3f ms > maximum 0.000 ms", st.Results.P99Ms)}
		if strings.Join(st.VerdictReasons, "|") != strings.Join(want, "|") {
			t.Fatalf("seed %d: rate %v, p99 %v: reasons %q, reported %v req/s and p99 %v ms",
				seed, rps, p99, st.VerdictReasons, st.Results.RequestsPerSecond, st.Results.P99Ms)
		}
	}
}
