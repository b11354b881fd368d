package result

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Verdict holds the thresholds of a run and whether they were met; a
// missed threshold makes sluice-bench exit 99. Its Failures are the one
// wording of a missed threshold: the Benchmark resource's verdictReasons
// are these lines.
type Verdict struct {
	MinRPS  float64 `json:"min_rps,omitempty"`
	MaxP99  float64 `json:"max_p99_ms,omitempty"`
	MaxLost *int64  `json:"max_lost,omitempty"`
	// MaxUnavailable bounds every fault's unavailability window (seconds);
	// MaxRecovery its time to recovery (a fault never recovered from fails).
	MaxUnavailable *float64 `json:"max_unavailable_s,omitempty"`
	MaxRecovery    *float64 `json:"max_recovery_s,omitempty"`
	Pass           bool     `json:"pass"`
	Failures       []string `json:"failures,omitempty"`
}

// Any reports whether any threshold is set.
func (v *Verdict) Any() bool {
	return v != nil && (v.MinRPS > 0 || v.MaxP99 > 0 || v.MaxLost != nil || v.MaxUnavailable != nil || v.MaxRecovery != nil)
}

// Check evaluates the thresholds against a summarized result: req/s over
// all operations, the worst operation's p99, and lost messages; and a
// queue move the run asked for, which must have finished.
func (v *Verdict) Check(r *Result) {
	v.Pass, v.Failures = true, nil
	fail := func(f string, a ...any) { v.Pass = false; v.Failures = append(v.Failures, fmt.Sprintf(f, a...)) }
	if r.Total == nil {
		r.Total = &Totals{}
	}
	// The figures judged and quoted are the ones the status reports
	// (rounded to 3 decimals): quoting the unrounded rate could show a
	// last digit other than the reported rate's.
	rps, p99 := r3(r.Total.ReqsPerSec), r3(r.Total.P99)
	if v.MinRPS > 0 && rps < v.MinRPS {
		fail("requests/s %.1f < minimum %.1f", rps, v.MinRPS)
	}
	if v.MaxP99 > 0 && p99 > v.MaxP99 {
		fail("p99 %.3f ms > maximum %.3f ms", p99, v.MaxP99)
	}
	if v.MaxLost != nil {
		var lost, produced int64
		if r.Delivery != nil {
			lost, produced = r.Delivery.Lost, r.Delivery.Produced
		}
		switch {
		case lost > *v.MaxLost:
			fail("lost %d > maximum %d", lost, *v.MaxLost)
		case produced == 0:
			// Nothing to lose is not a delivery that held: a run whose
			// posts all failed must not pass a loss threshold.
			fail("no post was acknowledged: delivery not verified (maximum lost %d)", *v.MaxLost)
		}
	}
	// An operation none of whose requests succeeded measured only its own
	// failure (a wrong token, a message its queue refuses, a target down
	// the whole run): the run fails whatever the thresholds.
	for _, name := range slices.Sorted(maps.Keys(r.Ops)) {
		if o := r.Ops[name]; o.Requests > 0 && o.OK == 0 {
			fail("%s: none of %d requests succeeded (%s)", name, o.Requests, errorCounts(o.Errors))
		}
	}
	if r.Move != nil {
		// A move asked for is part of the run: one that did not finish
		// fails it whatever the thresholds.
		if why := r.Move.Failure(); why != "" {
			fail("%s", why)
		}
	}
	for _, f := range r.Faults {
		if v.MaxUnavailable != nil && f.Unavailable > *v.MaxUnavailable {
			fail("%s: unavailable %.3f s > maximum %.3f s", f.Name, f.Unavailable, *v.MaxUnavailable)
		}
		if v.MaxRecovery != nil && (f.Recovery == nil || *f.Recovery > *v.MaxRecovery) {
			got := "never recovered"
			if f.Recovery != nil {
				got = fmt.Sprintf("recovery %.3f s", *f.Recovery)
			}
			fail("%s: %s > maximum %.3f s", f.Name, got, *v.MaxRecovery)
		}
	}
	r.Verdict = v
}

// Reasons explains the verdict in lines: the missed thresholds, else why
// the run passed (every threshold met, or none set).
func (v *Verdict) Reasons() []string {
	switch {
	case !v.Pass:
		return v.Failures
	case v.Any():
		return []string{"all thresholds met"}
	}
	return []string{"no thresholds set"}
}

// errorCounts words an operation's failures by reason, most frequent first:
// "http_400 3266, timeout 2".
func errorCounts(errs map[string]int64) string {
	reasons := slices.SortedFunc(maps.Keys(errs), func(a, b string) int {
		return cmp.Or(cmp.Compare(errs[b], errs[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(reasons))
	for _, k := range reasons {
		parts = append(parts, k+" "+strconv.FormatInt(errs[k], 10))
	}
	return strings.Join(parts, ", ")
}
