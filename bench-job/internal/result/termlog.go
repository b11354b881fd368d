package result

import (
	"encoding/json"
	"fmt"
	"math"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

// TermLogLimit is Kubernetes' cap on a container's termination message.
const TermLogLimit = 4096

// Compact is the termination-log form of a Result: everything a merge
// needs (counts, error reasons, base64 HdrHistogram V2 snapshots, delivery
// bitsets) and nothing it does not (no per-second series). Fields that had
// to be dropped to stay under 4 KB are listed in Trunc, which tells the
// merger what is no longer exact.
type Compact struct {
	V        int                  `json:"v"`
	Scenario string               `json:"scenario"`
	Pods     int                  `json:"pods"`
	Start    int64                `json:"start"`
	End      int64                `json:"end"`
	Roles    [6]int               `json:"roles"` // pp pw cp cw op ow
	Ops      map[string]CompactOp `json:"ops"`
	D        *CompactDelivery     `json:"d,omitempty"`
	Dropped  int64                `json:"dropped,omitempty"`
	Steps    []CompactStep        `json:"steps,omitempty"`
	Verdict  *Verdict             `json:"verdict,omitempty"`
	Move     *Move                `json:"move,omitempty"`
	Trunc    []string             `json:"trunc,omitempty"`
}

// CompactOp is one operation: counts, derived numbers for humans, and the
// histogram H that makes merging exact.
type CompactOp struct {
	N    int64                         `json:"n"`
	OK   int64                         `json:"ok"`
	Err  map[string]int64              `json:"err,omitempty"`
	RA   map[string]metrics.RetryAfter `json:"ra,omitempty"` // OpResult.RetryAfter
	X    map[string]int64              `json:"x,omitempty"`
	RPS  float64                       `json:"rps"`
	Mean float64                       `json:"mean"`
	P50  float64                       `json:"p50"`
	P90  float64                       `json:"p90"`
	P99  float64                       `json:"p99"`
	P999 float64                       `json:"p999"`
	Max  float64                       `json:"max"`
	H    string                        `json:"h,omitempty"`
}

// CompactDelivery carries delivery counts and, when they fit, the bitsets.
type CompactDelivery struct {
	P       int64             `json:"produced"`
	C       int64             `json:"consumed"`
	U       int64             `json:"unique"`
	Lost    int64             `json:"lost"`
	Dup     int64             `json:"dup"`
	Redel   int64             `json:"redelivered,omitempty"`
	Unacked int64             `json:"unacked"`
	Foreign int64             `json:"foreign"`
	PB      map[string]string `json:"pb,omitempty"`
	SB      map[string]string `json:"sb,omitempty"`
	E2E     CompactOp         `json:"e2e"`
}

// CompactStep is one sweep step.
type CompactStep struct {
	L   string               `json:"l"`
	V   int64                `json:"v"`
	S   int64                `json:"s"`
	E   int64                `json:"e"`
	Ops map[string]CompactOp `json:"ops"`
}

func r3(f float64) float64 { return math.Round(f*1000) / 1000 }

func compactOp(o *OpResult, withHist, twoDigits bool) CompactOp {
	c := CompactOp{N: o.Requests, OK: o.OK, Err: o.Errors, RA: o.RetryAfter, X: o.Extra, RPS: r3(o.ReqsPerSec), Mean: r3(o.Mean),
		P50: o.P50, P90: o.P90, P99: o.P99, P999: o.P999, Max: o.Max}
	if len(c.Err) == 0 {
		c.Err = nil
	}
	if withHist {
		c.H = o.Hist
		if twoDigits {
			c.H = reencode(o)
		}
	}
	return c
}

// reencode copies a histogram at 2 significant digits (values within 1%),
// which shrinks its encoding several times over.
func reencode(o *OpResult) string {
	h, err := o.Histogram()
	if err != nil {
		return ""
	}
	low := hdr.New(1, h.HighestTrackableValue(), 2)
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			_ = low.RecordValues(b.To, b.Count)
		}
	}
	enc, err := low.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(enc)
}

// TermLog renders r (already summarized) in at most TermLogLimit bytes,
// shedding the least important detail first.
func (r *Result) TermLog() ([]byte, error) {
	levels := [][]string{nil, {"step_hist"}, {"step_hist", "hist2"}, {"step_hist", "hist2", "bitsets"},
		{"step_hist", "hist2", "bitsets", "e2e_hist"}, {"step_hist", "bitsets", "e2e_hist", "hist"},
		{"step_hist", "bitsets", "e2e_hist", "hist", "steps", "errors"}}
	for _, drop := range levels {
		b, err := json.Marshal(r.compact(drop))
		if err != nil {
			return nil, err
		}
		if len(b) <= TermLogLimit {
			return b, nil
		}
	}
	return nil, fmt.Errorf("summary does not fit in %d bytes", TermLogLimit)
}

func (r *Result) compact(drop []string) *Compact {
	has := func(s string) bool {
		for _, d := range drop {
			if d == s {
				return true
			}
		}
		return false
	}
	p := r.Params
	c := &Compact{V: Version, Scenario: r.Scenario, Pods: r.Pods, Start: r.Start, End: r.End, Dropped: r.Dropped,
		Roles: [6]int{p.Producer.Processes, p.Producer.Workers, p.Consumer.Processes, p.Consumer.Workers, p.Observer.Processes, p.Observer.Workers},
		Ops:   map[string]CompactOp{}, Verdict: r.Verdict, Move: r.Move, Trunc: drop}
	for n, o := range r.Ops {
		op := compactOp(o, !has("hist"), has("hist2"))
		if has("errors") {
			op.Err, op.RA, op.X = nil, nil, nil
		}
		c.Ops[n] = op
	}
	if d := r.Delivery; d != nil {
		c.D = &CompactDelivery{P: d.Produced, C: d.Consumed, U: d.Unique, Lost: d.Lost, Dup: d.Duplicated, Redel: d.Redelivered,
			Unacked: d.Unacked, Foreign: d.Foreign, E2E: compactOp(d.E2E, !has("e2e_hist"), has("hist2"))}
		if !has("bitsets") {
			c.D.PB, c.D.SB = d.ProducedBits, d.SeenBits
		}
	}
	if !has("steps") {
		for _, s := range r.Steps {
			cs := CompactStep{L: s.Label, V: s.Value, S: s.Start, E: s.End, Ops: map[string]CompactOp{}}
			for n, o := range s.Ops {
				cs.Ops[n] = compactOp(o, !has("step_hist"), true)
			}
			c.Steps = append(c.Steps, cs)
		}
	}
	return c
}

// FromCompact rebuilds a Result from a termination log. Where a histogram
// was dropped, one is approximated from the recorded percentiles (listed in
// Trunc, so consumers know the merged percentiles are not exact).
func FromCompact(c *Compact) *Result {
	r := &Result{Scenario: c.Scenario, Pods: c.Pods, Start: c.Start, End: c.End, Dropped: c.Dropped,
		Ops: map[string]*OpResult{}, Verdict: c.Verdict, Move: c.Move, Truncated: c.Trunc}
	r.Params.Producer = Role{c.Roles[0], c.Roles[1]}
	r.Params.Consumer = Role{c.Roles[2], c.Roles[3]}
	r.Params.Observer = Role{c.Roles[4], c.Roles[5]}
	for n, o := range c.Ops {
		r.Ops[n] = fromCompactOp(o)
	}
	if d := c.D; d != nil {
		r.Delivery = &Delivery{Produced: d.P, Consumed: d.C, Unique: d.U, Lost: d.Lost, Duplicated: d.Dup, Redelivered: d.Redel,
			Unacked: d.Unacked, Foreign: d.Foreign, ProducedBits: d.PB, SeenBits: d.SB, E2E: fromCompactOp(d.E2E)}
	}
	for _, s := range c.Steps {
		st := &Step{Label: s.L, Value: s.V, Start: s.S, End: s.E, Ops: map[string]*OpResult{}}
		for n, o := range s.Ops {
			st.Ops[n] = fromCompactOp(o)
		}
		r.Steps = append(r.Steps, st)
	}
	return r
}

func fromCompactOp(o CompactOp) *OpResult {
	op := &OpResult{Requests: o.N, OK: o.OK, Errors: o.Err, RetryAfter: o.RA, Extra: o.X, Hist: o.H}
	if o.H == "" && o.OK > 0 {
		op.h = approxHist(o)
	}
	return op
}

// approxHist spreads OK samples over the recorded percentiles.
func approxHist(o CompactOp) *hdr.Histogram {
	h := newHist()
	n := o.OK
	parts := []struct {
		v    float64
		frac float64
	}{{o.P50, 0.5}, {o.P90, 0.4}, {o.P99, 0.09}, {o.P999, 0.009}}
	var used int64
	for _, p := range parts {
		k := int64(float64(n) * p.frac)
		_ = h.RecordValues(max(1, int64(p.v*1000)), k)
		used += k
	}
	_ = h.RecordValues(max(1, int64(o.Max*1000)), n-used)
	return h
}
