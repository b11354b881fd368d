package result

import (
	"fmt"
	"math"

	"sluice.dev/bench/internal/metrics"
)

// Status is a merged run as the Benchmark resource shows it: the fields
// the operator copies into status.results, status.verdict,
// status.verdictReasons and status.message. Kubernetes spells status in
// camelCase (p99Ms), the summary in snake_case (p99_ms); this file is the
// only place where the first spelling is written, so the operator never
// renames or recomputes a number (docs/benchmark-cr.md lists the fields).
type Status struct {
	Results        StatusResults `json:"results"`
	Verdict        string        `json:"verdict"` // Pass or Fail
	VerdictReasons []string      `json:"verdictReasons"`
	Message        string        `json:"message"`
}

// StatusResults is status.results: totals over every operation and pod,
// delivery verification, and one row per operation.
type StatusResults struct {
	RequestsPerSecond float64             `json:"requestsPerSecond"`
	P99Ms             float64             `json:"p99Ms"` // the worst operation's p99, as Totals.P99
	Produced          int64               `json:"produced"`
	Consumed          int64               `json:"consumed"`
	Lost              int64               `json:"lost"`
	Duplicated        int64               `json:"duplicated"`
	Redelivered       int64               `json:"redelivered"` // claimed again after a failed delete (not duplicates)
	Exact             bool                `json:"exact"`
	Pods              int                 `json:"pods"`
	DurationSeconds   float64             `json:"durationSeconds"`
	Requests          int64               `json:"requests"`
	Errors            int64               `json:"errors"`
	Dropped           int64               `json:"dropped"`
	Operations        map[string]StatusOp `json:"operations"`
	Truncated         []string            `json:"truncated,omitempty"`
	Move              *StatusMove         `json:"move,omitempty"`

	// ErrorsByReason: Errors by zaqar.Reason ("http_503", "timeout", ...),
	// summed over the operations; RetryAfter: those of them whose response
	// carried a Retry-After header, by the same reasons. Both are absent
	// when nothing failed, or when the termination logs had to shed their
	// error tables (Truncated lists "errors").
	ErrorsByReason map[string]int64              `json:"errorsByReason,omitempty"`
	RetryAfter     map[string]metrics.RetryAfter `json:"retryAfter,omitempty"`
}

// StatusMove is status.results.move: the queue move the run asked for.
type StatusMove struct {
	Pool            string  `json:"pool"`
	State           string  `json:"state"`
	Queues          int     `json:"queues"`
	MessagesMoved   int64   `json:"messagesMoved"`
	DurationSeconds float64 `json:"durationSeconds"`
	P99BeforeMs     float64 `json:"p99BeforeMs"`
	P99DuringMs     float64 `json:"p99DuringMs"`
	Error           string  `json:"error,omitempty"`
}

// StatusOp is one operation's row in status.results.operations.
type StatusOp struct {
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	MsPerRequest      float64 `json:"msPerRequest"`
	P50Ms             float64 `json:"p50Ms"`
	P90Ms             float64 `json:"p90Ms"`
	P99Ms             float64 `json:"p99Ms"`
	P999Ms            float64 `json:"p999Ms"`
	MaxMs             float64 `json:"maxMs"`
	Requests          int64   `json:"requests"`
	Errors            int64   `json:"errors"`
	// Counts are the operation's own tallies beside requests (the
	// notification receiver's faulted calls, for one).
	Counts map[string]int64 `json:"counts,omitempty"`
}

// StatusOf describes a summarized result for the Benchmark resource,
// judged by v (nil: no thresholds). ownQueues says every pod used queues
// no other pod touched (--pod-index): no message can then be claimed in
// two pods, so the pods' own delivery counts add up exactly even where a
// termination log had to shed its bitsets.
func StatusOf(r *Result, v *Verdict, ownQueues bool) Status {
	if v == nil {
		v = &Verdict{}
	}
	v.Check(r)
	t := r.Total
	res := StatusResults{
		RequestsPerSecond: r3(t.ReqsPerSec), P99Ms: r3(t.P99), Exact: true, Pods: r.Pods,
		DurationSeconds: r3(r.Duration), Requests: t.Requests, Errors: t.Errors, Dropped: r.Dropped,
		Operations: map[string]StatusOp{}, Truncated: r.Truncated,
	}
	if d := r.Delivery; d != nil {
		res.Produced, res.Consumed, res.Lost, res.Duplicated = d.Produced, d.Consumed, d.Lost, d.Duplicated
		res.Redelivered = d.Redelivered
		res.Exact = d.Exact || ownQueues
	}
	if m := r.Move; m != nil {
		res.Move = &StatusMove{Pool: m.Pool, State: m.State, Queues: m.Queues, MessagesMoved: m.Moved,
			DurationSeconds: r3(m.Duration), P99BeforeMs: r3(m.P99Before), P99DuringMs: r3(m.P99During), Error: m.Error}
	}
	for name, o := range r.Ops {
		res.ErrorsByReason = addCounts(res.ErrorsByReason, o.Errors)
		res.RetryAfter = metrics.MergeRetries(res.RetryAfter, o.RetryAfter)
		res.Operations[name] = StatusOp{RequestsPerSecond: r3(o.ReqsPerSec), MsPerRequest: r3(o.Mean),
			P50Ms: r3(o.P50), P90Ms: r3(o.P90), P99Ms: r3(o.P99), P999Ms: r3(o.P999), MaxMs: r3(o.Max),
			Requests: o.Requests, Errors: o.Failed, Counts: o.Extra}
	}
	verdict := "Pass"
	if !v.Pass {
		verdict = "Fail"
	}
	return Status{Results: res, Verdict: verdict, VerdictReasons: v.Reasons(),
		Message: fmt.Sprintf("%.1f req/s, p99 %.3f ms, lost %d, duplicated %d: %s",
			res.RequestsPerSecond, res.P99Ms, res.Lost, res.Duplicated, verdict)}
}

// ratio is a/b to 3 decimals; false when b is 0 (no meaningful ratio).
func ratio(a, b float64) (float64, bool) {
	if b == 0 {
		return 0, false
	}
	return math.Round(a/b*1000) / 1000, true
}
