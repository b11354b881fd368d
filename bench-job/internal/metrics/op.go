// Package metrics records what a load run observed: per-operation latency
// histograms (HdrHistogram, microseconds), per-second windows for the time
// series, error counts by reason, and end-to-end delivery bookkeeping.
package metrics

import (
	"sort"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 2 min at 3 significant digits. Requests slower
// than the top are clamped to it (and a request timeout is shorter anyway).
const (
	histMin    = 1
	histMax    = 120_000_000
	histDigits = 3
)

// NewHist returns an empty histogram with the range every sluice-bench
// histogram uses, so any two of them merge exactly.
func NewHist() *hdr.Histogram { return hdr.New(histMin, histMax, histDigits) }

// RecordMicros adds one latency, clamped into the histogram's range.
func RecordMicros(h *hdr.Histogram, us int64) {
	if us < histMin {
		us = histMin
	} else if us > histMax {
		us = histMax
	}
	_ = h.RecordValue(us)
}

// Point is one second of one operation: successful count, errors, and that
// second's latency histogram (encoded) so series merge exactly too.
type Point struct {
	T    int64   `json:"t"` // unix second the requests completed in
	N    int64   `json:"n"`
	Err  int64   `json:"err"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	Max  float64 `json:"max_ms"`
	Hist string  `json:"hist,omitempty"`

	// The second's failures by reason (zaqar.Reason), and when the first
	// and last of them finished (unix ms): a fault's unavailability window
	// is measured from these, finer than the one-second series.
	Kinds    map[string]int64 `json:"kinds,omitempty"`
	ErrFirst int64            `json:"err_first_ms,omitempty"`
	ErrLast  int64            `json:"err_last_ms,omitempty"`
	// Retry: of the second's failed responses, those that carried
	// Retry-After, by reason (a fault's window sums them as it does Kinds).
	Retry map[string]RetryAfter `json:"retry_after,omitempty"`
}

// AddFailures folds another window's failures of the same second into p.
func (p *Point) AddFailures(kinds map[string]int64, first, last int64) {
	if len(kinds) == 0 {
		return
	}
	if p.Kinds == nil {
		p.Kinds = map[string]int64{}
	}
	for k, v := range kinds {
		p.Kinds[k] += v
	}
	if p.ErrFirst == 0 || first < p.ErrFirst {
		p.ErrFirst = first
	}
	p.ErrLast = max(p.ErrLast, last)
}

// AddRetries folds another window's Retry-After counts of the same second
// into p.
func (p *Point) AddRetries(retry map[string]RetryAfter) { p.Retry = MergeRetries(p.Retry, retry) }

// Op accumulates one operation (post, claim, delete, list, get). A mutex
// per operation is cheap next to a network round trip and keeps the
// per-second windows exact.
type Op struct {
	Name string

	mu       sync.Mutex
	hist     *hdr.Histogram
	win      *hdr.Histogram
	winSec   int64
	winErr   int64
	winKinds map[string]int64
	winRetry map[string]RetryAfter
	winFirst int64 // unix ms of the window's first and last failure
	winLast  int64
	series   []Point
	requests int64
	ok       int64
	errs     map[string]int64
	retry    map[string]RetryAfter // failures that carried Retry-After, by reason
	extra    map[string]int64
}

// NewOp returns an empty recorder for one operation.
func NewOp(name string) *Op {
	return &Op{Name: name, hist: NewHist(), win: NewHist(), errs: map[string]int64{}, extra: map[string]int64{}}
}

// Success records a completed request that took lat, finishing at end.
func (o *Op) Success(end time.Time, lat time.Duration) {
	us := lat.Microseconds()
	o.mu.Lock()
	o.roll(end.Unix())
	o.requests++
	o.ok++
	RecordMicros(o.hist, us)
	RecordMicros(o.win, us)
	o.mu.Unlock()
}

// Failure records a request that failed for reason (see zaqar.Reason).
func (o *Op) Failure(end time.Time, reason string) {
	o.mu.Lock()
	o.fail(end, reason)
	o.mu.Unlock()
}

// FailureRetry records a failed response that carried a Retry-After header
// asking for secs seconds (secs < 0: a value that could not be read).
func (o *Op) FailureRetry(end time.Time, reason string, secs int64) {
	o.mu.Lock()
	o.fail(end, reason)
	if o.retry == nil {
		o.retry = map[string]RetryAfter{}
	}
	if o.winRetry == nil {
		o.winRetry = map[string]RetryAfter{}
	}
	for _, m := range []map[string]RetryAfter{o.retry, o.winRetry} {
		ra := m[reason]
		ra.Add(secs)
		m[reason] = ra
	}
	o.mu.Unlock()
}

// fail counts one failure, o.mu held.
func (o *Op) fail(end time.Time, reason string) {
	o.roll(end.Unix())
	o.requests++
	o.winErr++
	o.errs[reason]++
	ms := end.UnixMilli()
	if o.winKinds == nil {
		o.winKinds = map[string]int64{}
		o.winFirst = ms
	}
	o.winKinds[reason]++
	o.winFirst, o.winLast = min(o.winFirst, ms), max(o.winLast, ms)
}

// Count bumps a named side counter (for example "empty" claims).
func (o *Op) Count(name string, n int64) {
	o.mu.Lock()
	o.extra[name] += n
	o.mu.Unlock()
}

// roll closes the current one-second window when a request finishes in a
// later second. Late finishers from an earlier second stay in the current
// window: off by at most one tick, never lost.
func (o *Op) roll(sec int64) {
	if o.winSec == 0 {
		o.winSec = sec
		return
	}
	if sec <= o.winSec {
		return
	}
	o.flush()
	o.winSec = sec
}

func (o *Op) flush() {
	if o.win.TotalCount() == 0 && o.winErr == 0 {
		return
	}
	p := PointFrom(o.winSec, o.win, o.winErr)
	p.AddFailures(o.winKinds, o.winFirst, o.winLast)
	p.AddRetries(o.winRetry)
	if enc, err := o.win.Encode(hdr.V2CompressedEncodingCookieBase); err == nil {
		p.Hist = string(enc)
	}
	o.series = append(o.series, p)
	o.win.Reset()
	o.winErr, o.winKinds, o.winRetry, o.winFirst, o.winLast = 0, nil, nil, 0, 0
}

// PointFrom summarises one window's histogram.
func PointFrom(sec int64, h *hdr.Histogram, errs int64) Point {
	return Point{T: sec, N: h.TotalCount(), Err: errs,
		P50: Ms(h.ValueAtQuantile(50)), P90: Ms(h.ValueAtQuantile(90)),
		P99: Ms(h.ValueAtQuantile(99)), P999: Ms(h.ValueAtQuantile(99.9)), Max: Ms(h.Max())}
}

// Ms converts histogram microseconds to milliseconds.
func Ms(us int64) float64 { return float64(us) / 1000 }

// Snapshot is an operation's final state, safe to keep after the run.
type Snapshot struct {
	Name     string
	Requests int64
	OK       int64
	Errors   map[string]int64
	Retry    map[string]RetryAfter // failures that carried Retry-After, by reason; nil if none
	Extra    map[string]int64
	Hist     *hdr.Histogram
	Series   []Point
}

// Finish flushes the last window and returns the operation's results.
func (o *Op) Finish() Snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flush()
	sort.Slice(o.series, func(i, j int) bool { return o.series[i].T < o.series[j].T })
	return Snapshot{Name: o.Name, Requests: o.requests, OK: o.ok, Errors: copyMap(o.errs), Retry: MergeRetries(nil, o.retry),
		Extra: copyMap(o.extra), Hist: hdr.Import(o.hist.Export()), Series: append([]Point(nil), o.series...)}
}

// Live returns counters for the progress line without closing windows.
func (o *Op) Live() (requests, ok int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests, o.ok
}

func copyMap(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
