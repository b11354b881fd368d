package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"sluice.dev/bench/internal/metrics"
)

// Fault is one fault injected during a run, at its actual time.
type Fault struct {
	Name string `json:"name"`
	At   int64  `json:"at_unix_ms"`
}

// FaultResult is what clients saw around one fault. Times are seconds
// after the fault; a nil pointer means "did not happen" (no failed request;
// never recovered before the next fault or the end of the run).
type FaultResult struct {
	Fault
	// FirstError: the first failed request at or after the fault.
	FirstError *float64 `json:"first_error_s"`
	// Unavailable: from the first to the last failed request of the
	// fault's window (0 when no request failed).
	Unavailable float64 `json:"unavailable_s"`
	// Recovery: the start of the first whole second after the last failed
	// request in which successes reached RecoveryShare of the pre-fault
	// rate.
	Recovery *float64 `json:"recovery_s"`
	// BaselineRPS: successes per second over the whole seconds before the
	// fault (at most baselineSeconds, none from an earlier fault's window).
	BaselineRPS float64 `json:"baseline_rps"`
	// Errors: failed requests in the fault's window, by reason (a second
	// whose failures span a window's boundary counts in both windows).
	Errors map[string]int64 `json:"errors"`
	// RetryAfter: the failures of Errors whose response carried a
	// Retry-After header, by the same reasons (absent: none did).
	RetryAfter map[string]metrics.RetryAfter `json:"retry_after,omitempty"`
}

// RecoveryShare is the share of the pre-fault success rate that counts as
// recovered.
const RecoveryShare = 0.9

// baselineSeconds bounds how far back the pre-fault rate is taken.
const baselineSeconds = 10

// second is every operation's successes and failures in one unix second.
type second struct {
	ok          int64
	first, last int64 // unix ms of the first and last failure; 0 if none
	kinds       map[string]int64
	retry       map[string]metrics.RetryAfter
}

// AnalyzeFaults measures each fault over its window: from its time to the
// next fault's (or the end of the load phase). All operations count alike:
// a client sees the service, not an operation, go away.
func AnalyzeFaults(r *Result, faults []Fault) []FaultResult {
	if len(faults) == 0 {
		return nil
	}
	faults = append([]Fault(nil), faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	secs := map[int64]*second{}
	for _, o := range r.Ops {
		for _, p := range o.Series {
			s := secs[p.T]
			if s == nil {
				s = &second{kinds: map[string]int64{}}
				secs[p.T] = s
			}
			s.ok += p.N
			addFailures(s, p)
		}
	}
	out := make([]FaultResult, len(faults))
	for i, f := range faults {
		from, to := f.At, r.End
		if i+1 < len(faults) {
			to = faults[i+1].At
		}
		lower := r.Start
		if i > 0 {
			lower = faults[i-1].At
		}
		out[i] = analyzeOne(f, secs, lower, from, to)
	}
	return out
}

func addFailures(s *second, p metrics.Point) {
	for k, v := range p.Kinds {
		s.kinds[k] += v
	}
	if p.ErrFirst != 0 && (s.first == 0 || p.ErrFirst < s.first) {
		s.first = p.ErrFirst
	}
	s.last = max(s.last, p.ErrLast)
	s.retry = metrics.MergeRetries(s.retry, p.Retry)
}

// analyzeOne measures the fault f whose window is [from, to), with the
// pre-fault rate taken from whole seconds in [lower, from).
func analyzeOne(f Fault, secs map[int64]*second, lower, from, to int64) FaultResult {
	fr := FaultResult{Fault: f, Errors: map[string]int64{}}
	var base, n int64
	for t := from/1000 - 1; t >= 0 && t*1000 >= lower && n < baselineSeconds; t-- {
		if s := secs[t]; s != nil {
			base += s.ok
		}
		n++
	}
	if n > 0 {
		fr.BaselineRPS = float64(base) / float64(n)
	}
	var first, last int64
	for t := from / 1000; t*1000 < to; t++ {
		s := secs[t]
		// A boundary second's failures belong to the window they fell in;
		// the series keeps only their first and last time, so a burst that
		// spans the boundary itself counts in both windows.
		if s == nil || s.first == 0 || s.last < from || s.first >= to {
			continue
		}
		for k, v := range s.kinds {
			fr.Errors[k] += v
		}
		fr.RetryAfter = metrics.MergeRetries(fr.RetryAfter, s.retry)
		if first == 0 {
			first = max(s.first, from)
		}
		last = min(s.last, to-1)
	}
	if first != 0 {
		fe := float64(first-from) / 1000
		fr.FirstError = &fe
		fr.Unavailable = float64(last-first) / 1000
	}
	// Recovered: the first whole second after the last failure whose
	// successes reach the share of the baseline (a run with no baseline
	// recovers at its first second with any success).
	start := from
	if last != 0 {
		start = last + 1
	}
	for t := (start + 999) / 1000; (t+1)*1000 <= to; t++ {
		s := secs[t]
		if s != nil && s.ok > 0 && float64(s.ok) >= RecoveryShare*fr.BaselineRPS {
			rec := max(float64(t*1000-from)/1000, 0)
			if last == 0 && t == (from+999)/1000 {
				rec = 0 // the rate never dipped
			}
			fr.Recovery = &rec
			break
		}
	}
	return fr
}

// LoadFaults reads a JSON list of faults; every fault needs a name and a
// time.
func LoadFaults(path string) ([]Fault, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fs []Fault
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fs); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of faults: %w", path, err)
	}
	for i, f := range fs {
		if f.Name == "" || f.At <= 0 {
			return nil, fmt.Errorf("%s: fault %d needs a name and at_unix_ms > 0", path, i)
		}
	}
	return fs, nil
}
