package report

import (
	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot/plotter"
)

// maxCDFPoints bounds the points of one CDF curve; past it, neighbouring
// buckets are merged pairwise, so the curve stays exact at every merged
// bucket's edges and cheap to draw.
const maxCDFPoints = 4000

// cdfPoints is the empirical latency CDF of h in milliseconds: one step per
// recorded bucket (from the bucket's lowest value at the fraction below it
// to its highest value at the fraction including it). It is drawn from
// every bucket rather than from the halving percentile ticks of
// CumulativeDistribution, whose few points turn the lower half of a curve
// into a straight line between the minimum and the median.
func cdfPoints(h *hdr.Histogram) plotter.XYs {
	total := h.TotalCount()
	if total == 0 {
		return nil
	}
	var bars []hdr.Bar
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			bars = append(bars, b)
		}
	}
	// Merge neighbouring buckets until the curve fits the budget.
	for len(bars)*2 > maxCDFPoints {
		merged := bars[:0]
		for i := 0; i < len(bars); i += 2 {
			b := bars[i]
			if i+1 < len(bars) {
				b.To, b.Count = bars[i+1].To, b.Count+bars[i+1].Count
			}
			merged = append(merged, b)
		}
		bars = merged
	}
	xys := make(plotter.XYs, 0, len(bars)*2)
	var cum int64
	for _, b := range bars {
		lo := max(float64(b.From), 1) / 1000
		xys = append(xys, plotter.XY{X: lo, Y: float64(cum) / float64(total)})
		cum += b.Count
		xys = append(xys, plotter.XY{X: max(float64(b.To), 1) / 1000, Y: float64(cum) / float64(total)})
	}
	return xys
}
