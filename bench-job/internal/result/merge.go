package result

import (
	"fmt"
	"sort"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

// Merge combines runs of several pods (or processes) into one result:
// counts are summed, histograms merged bucket by bucket (never averaged),
// per-second series aligned on wall-clock seconds, delivery bitsets OR-ed
// (a message claimed in two pods counts as duplicated), and the window is
// min(start)..max(end). The result is summarized and thresholds re-checked.
func Merge(rs []*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("nothing to merge")
	}
	out := &Result{Scenario: rs[0].Scenario, Target: rs[0].Target, Params: rs[0].Params,
		Start: rs[0].Start, End: rs[0].End, Ops: map[string]*OpResult{}}
	out.Params.Producer.Processes, out.Params.Consumer.Processes, out.Params.Observer.Processes = 0, 0, 0
	for i, r := range rs {
		if r.Scenario != out.Scenario {
			return nil, fmt.Errorf("input %d is scenario %q, not %q", i+1, r.Scenario, out.Scenario)
		}
		pods := r.Pods
		if pods == 0 {
			pods = 1
		}
		out.Pods += pods
		out.Params.Producer.Processes += r.Params.Producer.Processes
		out.Params.Consumer.Processes += r.Params.Consumer.Processes
		out.Params.Observer.Processes += r.Params.Observer.Processes
		out.Start = min(out.Start, r.Start)
		out.End = max(out.End, r.End)
		out.Dropped += r.Dropped
		if err := MergeOps(out.Ops, r.Ops); err != nil {
			return nil, err
		}
		if r.Delivery != nil {
			if out.Delivery == nil {
				out.Delivery = &Delivery{E2E: &OpResult{}, ProducedBits: map[string]string{}, SeenBits: map[string]string{}}
			}
			if err := out.Delivery.merge(r.Delivery); err != nil {
				return nil, err
			}
		}
		for j, s := range r.Steps {
			if j >= len(out.Steps) {
				out.Steps = append(out.Steps, &Step{Label: s.Label, Value: s.Value, Start: s.Start, End: s.End, Ops: map[string]*OpResult{}})
			}
			os := out.Steps[j]
			os.Start, os.End = min(os.Start, s.Start), max(os.End, s.End)
			if err := MergeOps(os.Ops, s.Ops); err != nil {
				return nil, err
			}
		}
		if r.Move != nil {
			out.Move = mergeMoves(out.Move, r.Move)
		}
		out.Truncated = union(out.Truncated, r.Truncated)
		if r.Verdict != nil && out.Verdict == nil {
			v := *r.Verdict
			out.Verdict = &v
		}
	}
	if err := out.Summarize(); err != nil {
		return nil, err
	}
	if out.Verdict != nil {
		out.Verdict.Check(out)
	}
	return out, nil
}

// MergeOps adds every operation of src into dst.
func MergeOps(dst, src map[string]*OpResult) error {
	for name, o := range src {
		d := dst[name]
		if d == nil {
			d = &OpResult{Errors: map[string]int64{}}
			dst[name] = d
		}
		if err := mergeOp(d, o); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// mergeOp adds o into d (histograms exactly, series by second).
func mergeOp(d, o *OpResult) error {
	if o == nil {
		return nil
	}
	d.Requests += o.Requests
	d.OK += o.OK
	d.Errors = addCounts(d.Errors, o.Errors)
	d.RetryAfter = metrics.MergeRetries(d.RetryAfter, o.RetryAfter)
	d.Extra = addCounts(d.Extra, o.Extra)
	dh, err := d.Histogram()
	if err != nil {
		return err
	}
	oh, err := o.Histogram()
	if err != nil {
		return err
	}
	dh.Merge(oh)
	if len(o.Series) > 0 {
		d.Series, err = mergeSeries(d.Series, o.Series)
	}
	return err
}

// union adds the names of b missing from a, keeping the list sorted.
func union(a, b []string) []string {
	for _, s := range b {
		if i := sort.SearchStrings(a, s); i == len(a) || a[i] != s {
			a = append(a, "")
			copy(a[i+1:], a[i:])
			a[i] = s
		}
	}
	return a
}

func addCounts(d, o map[string]int64) map[string]int64 {
	if len(o) == 0 {
		return d
	}
	if d == nil {
		d = map[string]int64{}
	}
	for k, v := range o {
		d[k] += v
	}
	return d
}

func mergeSeries(a, b []metrics.Point) ([]metrics.Point, error) {
	byT := map[int64]*hdr.Histogram{}
	errs := map[int64]int64{}
	fails := map[int64]*metrics.Point{} // failures by kind and their first/last time
	for _, s := range [][]metrics.Point{a, b} {
		for _, p := range s {
			h := byT[p.T]
			if h == nil {
				h = metrics.NewHist()
				byT[p.T] = h
			}
			if p.Hist != "" {
				ph, err := hdr.Decode([]byte(p.Hist))
				if err != nil {
					return nil, err
				}
				h.Merge(ph)
			}
			errs[p.T] += p.Err
			if len(p.Kinds) > 0 {
				if fails[p.T] == nil {
					fails[p.T] = &metrics.Point{}
				}
				fails[p.T].AddFailures(p.Kinds, p.ErrFirst, p.ErrLast)
			}
			if len(p.Retry) > 0 {
				if fails[p.T] == nil {
					fails[p.T] = &metrics.Point{}
				}
				fails[p.T].AddRetries(p.Retry)
			}
		}
	}
	out := make([]metrics.Point, 0, len(byT))
	for t, h := range byT {
		p := metrics.PointFrom(t, h, errs[t])
		if f := fails[t]; f != nil {
			p.AddFailures(f.Kinds, f.ErrFirst, f.ErrLast)
			p.AddRetries(f.Retry)
		}
		if enc, err := h.Encode(hdr.V2CompressedEncodingCookieBase); err == nil {
			p.Hist = string(enc)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out, nil
}
