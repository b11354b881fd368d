// Package result is the data model of a finished run: what is printed as
// JSON, written to the run directory, squeezed into the termination log,
// merged across pods and compared between runs.
package result

import (
	"fmt"
	"sort"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

// Version of the summary format; bumped on incompatible changes.
const Version = 1

// Result is one run (or the merge of several pods' runs).
type Result struct {
	Version  int                  `json:"version"`
	Tool     string               `json:"tool"`
	Scenario string               `json:"scenario"`
	Target   string               `json:"target,omitempty"`
	Pods     int                  `json:"pods"`
	Start    int64                `json:"start_unix_ms"` // load phase start
	End      int64                `json:"end_unix_ms"`   // load phase end
	Duration float64              `json:"duration_sec"`
	Params   Params               `json:"params"`
	Ops      map[string]*OpResult `json:"ops"`
	Total    *Totals              `json:"total,omitempty"`
	Delivery *Delivery            `json:"delivery,omitempty"`
	Dropped  int64                `json:"dropped"` // open loop: arrivals with no free worker
	Steps    []*Step              `json:"steps,omitempty"`
	Verdict  *Verdict             `json:"thresholds,omitempty"`
	Faults   []FaultResult        `json:"faults,omitempty"` // per injected fault (AnalyzeFaults)
	Move     *Move                `json:"move,omitempty"`   // the queue move asked for during the load (--move-to-pool)
	// Truncated lists what the termination logs behind this result had to
	// shed to fit in 4 KB (their trunc field): where histograms were shed,
	// percentiles are approximations; where bitsets were, delivery counts
	// are the pods' own sums.
	Truncated []string `json:"truncated,omitempty"`

	// zaqar-bench's own blocks, computed from the same samples.
	Producer map[string]float64 `json:"producer"`
	Consumer map[string]float64 `json:"consumer"`
	Observer map[string]float64 `json:"observer"`

	// Lost and Duplicated mirror the delivery block at top level for
	// scripts that only want the verdict on task distribution.
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
}

// Totals aggregates every operation of the run.
type Totals struct {
	Requests   int64   `json:"requests"`
	OK         int64   `json:"ok"`
	Errors     int64   `json:"errors"`
	ReqsPerSec float64 `json:"reqs_per_sec"`
	P99        float64 `json:"p99_ms"` // worst operation's p99
}

// OpResult is one operation's numbers. Hist (base64 HdrHistogram V2) is the
// source of truth; the percentiles are derived from it by Summarize.
type OpResult struct {
	Requests   int64            `json:"requests"`
	OK         int64            `json:"ok"`
	Failed     int64            `json:"failed"`
	Errors     map[string]int64 `json:"errors"`
	Extra      map[string]int64 `json:"extra,omitempty"`
	ReqsPerSec float64          `json:"reqs_per_sec"`
	Mean       float64          `json:"ms_mean"`
	P50        float64          `json:"p50_ms"`
	P90        float64          `json:"p90_ms"`
	P99        float64          `json:"p99_ms"`
	P999       float64          `json:"p99_9_ms"`
	Max        float64          `json:"max_ms"`
	Hist       string           `json:"hist"`
	Series     []metrics.Point  `json:"series,omitempty"`

	// RetryAfter: the failures of Errors whose response carried a
	// Retry-After header, by the same reasons (absent: none did).
	RetryAfter map[string]metrics.RetryAfter `json:"retry_after,omitempty"`

	h *hdr.Histogram
}

// Step is one point of a sweep (flood: connections; packing: backlog).
type Step struct {
	Label    string               `json:"label"`
	Value    int64                `json:"value"`
	Start    int64                `json:"start_unix_ms"`
	End      int64                `json:"end_unix_ms"`
	Duration float64              `json:"duration_sec"`
	Messages float64              `json:"messages_per_sec"` // messages through the queue per second
	Ops      map[string]*OpResult `json:"ops"`
}

// FromSnapshot converts a recorder's final state.
func FromSnapshot(s metrics.Snapshot) *OpResult {
	return &OpResult{Requests: s.Requests, OK: s.OK, Errors: s.Errors, RetryAfter: s.Retry, Extra: s.Extra,
		Series: s.Series, h: s.Hist}
}

// Histogram returns the decoded histogram (decoding Hist on first use).
func (o *OpResult) Histogram() (*hdr.Histogram, error) {
	if o.h != nil {
		return o.h, nil
	}
	if o.Hist == "" {
		o.h = metrics.NewHist()
		return o.h, nil
	}
	h, err := hdr.Decode([]byte(o.Hist))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	o.h = h
	return h, nil
}

// summarize derives rates and percentiles for a window of dur seconds.
func (o *OpResult) summarize(dur float64) error {
	h, err := o.Histogram()
	if err != nil {
		return err
	}
	o.Failed = o.Requests - o.OK
	if o.Errors == nil {
		o.Errors = map[string]int64{}
	}
	if dur > 0 {
		o.ReqsPerSec = float64(o.OK) / dur
	}
	o.Mean = h.Mean() / 1000
	o.P50 = metrics.Ms(h.ValueAtQuantile(50))
	o.P90 = metrics.Ms(h.ValueAtQuantile(90))
	o.P99 = metrics.Ms(h.ValueAtQuantile(99))
	o.P999 = metrics.Ms(h.ValueAtQuantile(99.9))
	o.Max = metrics.Ms(h.Max())
	enc, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return err
	}
	o.Hist = string(enc)
	return nil
}

// OpNames returns operation names in a stable order.
func OpNames(ops map[string]*OpResult) []string {
	order := map[string]int{"post": 0, "post_small": 1, "post_large": 2, "claim": 3, "delete": 4, "list": 5, "get": 6}
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := order[names[i]]
		oj, jok := order[names[j]]
		if iok && jok {
			return oi < oj
		}
		if iok != jok {
			return iok
		}
		return names[i] < names[j]
	})
	return names
}

// Summarize recomputes every derived field (rates, percentiles, totals,
// delivery verdict, zaqar-bench blocks) from counts and histograms.
func (r *Result) Summarize() error {
	r.Version, r.Tool = Version, "sluice-bench"
	if r.Pods == 0 {
		r.Pods = 1
	}
	r.Duration = float64(r.End-r.Start) / 1000
	tot := &Totals{}
	for _, name := range OpNames(r.Ops) {
		o := r.Ops[name]
		if err := o.summarize(r.Duration); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		tot.Requests += o.Requests
		tot.OK += o.OK
		tot.Errors += o.Failed
		if o.P99 > tot.P99 {
			tot.P99 = o.P99
		}
	}
	if r.Duration > 0 {
		tot.ReqsPerSec = float64(tot.OK) / r.Duration
	}
	r.Total = tot
	for _, s := range r.Steps {
		s.Duration = float64(s.End-s.Start) / 1000
		for _, name := range OpNames(s.Ops) {
			if err := s.Ops[name].summarize(s.Duration); err != nil {
				return err
			}
		}
		if d := s.Ops["delete"]; d != nil && s.Duration > 0 {
			s.Messages = float64(d.OK) / s.Duration
		} else if p := s.Ops["post"]; p != nil && s.Duration > 0 {
			s.Messages = float64(p.OK) / s.Duration
		}
	}
	if r.Delivery != nil {
		if err := r.Delivery.summarize(); err != nil {
			return err
		}
		r.Lost, r.Duplicated = r.Delivery.Lost, r.Delivery.Duplicated
	}
	r.fillZaqarBlocks()
	return nil
}
