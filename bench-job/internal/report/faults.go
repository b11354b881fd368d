package report

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"sluice.dev/bench/internal/result"
)

// faultBand marks one fault on a time-series plot: a line at the moment it
// was injected and its unavailability window (first to last failed
// request) shaded, over the whole height of the plot.
type faultBand struct {
	at, from, to float64 // x: seconds, as seriesXYs counts them
	failed       bool
}

var (
	faultLine  = color.NRGBA{R: 180, A: 255}
	faultShade = color.NRGBA{R: 200, G: 40, B: 40, A: 60} // translucent: the curves show through
)

// Plot draws the band; it is not a DataRanger, so it never widens axes.
func (b faultBand) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	if b.failed {
		x1, x2 := trX(b.from), trX(b.to)
		if x2-x1 < vg.Points(2) {
			x2 = x1 + vg.Points(2) // a window shorter than a pixel stays visible
		}
		c.FillPolygon(faultShade, c.ClipPolygonXY([]vg.Point{
			{X: x1, Y: c.Min.Y}, {X: x2, Y: c.Min.Y}, {X: x2, Y: c.Max.Y}, {X: x1, Y: c.Max.Y}}))
	}
	x := trX(b.at)
	if x >= c.Min.X && x <= c.Max.X {
		c.StrokeLine2(draw.LineStyle{Color: faultLine, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}},
			x, c.Min.Y, x, c.Max.Y)
	}
}

// faultBands places each fault of a run on the time axis of seriesXYs.
func faultBands(res *result.Result) []faultBand {
	x := func(ms int64) float64 { return float64(ms-res.Start) / 1000 }
	var out []faultBand
	for _, f := range res.Faults {
		b := faultBand{at: x(f.At)}
		if f.FirstError != nil {
			first := f.At + int64(*f.FirstError*1000)
			b.failed, b.from, b.to = true, x(first), x(first+int64(f.Unavailable*1000))
		}
		out = append(out, b)
	}
	return out
}
