package report

import (
	"math"
	"math/rand/v2"
	"testing"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
)

// TestCDFFollowsEveryBucket generates latency distributions (uniform,
// log-normal, bimodal; a few to many samples) and checks the drawn CDF
// against the histogram itself: it rises monotonically from 0 to 1, and
// between two neighbouring points it never jumps by more than the largest
// single bucket holds, so no part of a curve is an interpolated straight
// line over many buckets (the halving percentile ticks drew the lower half
// of every curve as one line from the minimum to the median).
func TestCDFFollowsEveryBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	type gen struct {
		name string
		next func() int64
	}
	gens := []gen{
		{"uniform", func() int64 { return 100 + r.Int64N(20_000) }},
		{"lognormal", func() int64 { return int64(math.Exp(6 + 1.5*r.NormFloat64())) }},
		{"bimodal", func() int64 {
			if r.IntN(2) == 0 {
				return 200 + r.Int64N(50)
			}
			return 40_000 + r.Int64N(5_000)
		}},
	}
	for _, g := range gens {
		name, gen := g.name, g.next
		for _, n := range []int{1, 7, 1_000, 200_000} {
			h := metrics.NewHist()
			for range n {
				metrics.RecordMicros(h, gen())
			}
			xys := cdfPoints(h)
			if len(xys) == 0 {
				t.Fatalf("%s/%d: no points", name, n)
			}
			if xys[0].Y != 0 || xys[len(xys)-1].Y != 1 {
				t.Errorf("%s/%d: curve runs from %v to %v, want 0 to 1", name, n, xys[0].Y, xys[len(xys)-1].Y)
			}
			// The largest step allowed: the fullest bucket, times two for
			// every pairwise merge the point budget forced.
			var biggest, buckets int64
			for _, b := range h.Distribution() {
				if b.Count > 0 {
					biggest, buckets = max(biggest, b.Count), buckets+1
				}
			}
			for ; buckets*2 > maxCDFPoints; buckets = (buckets + 1) / 2 {
				biggest *= 2
			}
			for i := 1; i < len(xys); i++ {
				if xys[i].X < xys[i-1].X || xys[i].Y < xys[i-1].Y {
					t.Fatalf("%s/%d: not monotonic at %d: %v then %v", name, n, i, xys[i-1], xys[i])
				}
				if xys[i].Y-xys[i-1].Y > float64(biggest)/float64(n)+1e-9 {
					t.Fatalf("%s/%d: jump of %.4f at %d exceeds the largest bucket (%d of %d)",
						name, n, xys[i].Y-xys[i-1].Y, i, biggest, n)
				}
			}
			if len(xys) > maxCDFPoints {
				t.Errorf("%s/%d: %d points, over the budget %d", name, n, len(xys), maxCDFPoints)
			}
			// The curve crosses one half where the histogram's own median
			// bucket is (with merged buckets: a step that contains it).
			medUS := h.ValueAtQuantile(50)
			med := float64(medUS) / 1000
			lo, hi := med, med
			for _, b := range h.Distribution() {
				if b.From <= medUS && medUS <= b.To {
					lo, hi = float64(b.From)/1000, float64(b.To)/1000
				}
			}
			cross := 0
			for cross < len(xys) && xys[cross].Y < 0.5 {
				cross++
			}
			if cross == 0 || cross == len(xys) || xys[cross].X < lo || xys[cross-1].X > hi {
				t.Errorf("%s/%d: the curve crosses 1/2 at point %d of %d, not at the median's bucket %.3f-%.3f ms", name, n, cross, len(xys), lo, hi)
			}
			if name == "uniform" && n == 200_000 {
				below := 0
				for _, p := range xys {
					if p.X < med {
						below++
					}
				}
				if below < 100 {
					t.Errorf("uniform: only %d points below the median", below)
				}
			}
		}
	}
}

// TestThroughputLeavesOutPartialSeconds: a load phase from 10.4 s to 14.6 s
// covers seconds 11, 12 and 13 whole; 10 and 14 are drawn for latency only.
func TestThroughputLeavesOutPartialSeconds(t *testing.T) {
	var pts []metrics.Point
	for sec := int64(10); sec <= 14; sec++ {
		pts = append(pts, metrics.Point{T: sec, N: 100, P50: 1, P99: 2})
	}
	res := &result.Result{Start: 10_400, End: 14_600}
	rps, p50, p99 := seriesXYs(res, pts)
	if len(p50) != 5 || len(p99) != 5 {
		t.Fatalf("latency curves have %d/%d points, want 5", len(p50), len(p99))
	}
	if len(rps) != 3 || !near(rps[0].X, 1.6) || !near(rps[2].X, 3.6) {
		t.Fatalf("throughput points %v, want x = 1.6, 2.6, 3.6 (seconds 11-13 end 1.6-3.6 s into the run)", rps)
	}
	// Aligned on whole seconds, nothing is left out.
	res = &result.Result{Start: 10_000, End: 15_000}
	if rps, _, _ := seriesXYs(res, pts); len(rps) != 5 {
		t.Fatalf("aligned run: %d throughput points, want 5", len(rps))
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
