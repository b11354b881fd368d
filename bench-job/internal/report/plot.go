package report

import (
	"bytes"
	"fmt"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
)

// Figure is one rendered PNG.
type Figure struct {
	Name  string // file name
	Title string
	PNG   []byte
}

// Plots renders the figures of a run: throughput and latency percentiles
// over time (basho_bench's two graphs), the latency CDF per operation, and
// for sweeps the throughput per step.
func Plots(res *result.Result) ([]Figure, error) {
	var figs []Figure
	add := func(name, title string, p *plot.Plot) error {
		wt, err := p.WriterTo(9*vg.Inch, 4*vg.Inch, "png")
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return err
		}
		figs = append(figs, Figure{Name: name, Title: title, PNG: buf.Bytes()})
		return nil
	}
	names := result.OpNames(res.Ops)

	tp := newPlot("Throughput (whole seconds only)", "elapsed (s)", "successful req/s")
	lat := newPlot("Latency p50 (dashed) and p99", "elapsed (s)", "ms")
	for i, n := range names {
		s := res.Ops[n].Series
		if len(s) == 0 {
			continue
		}
		rps, p50, p99 := seriesXYs(res, s)
		if len(rps) > 0 {
			if err := line(tp, rps, i, n, false); err != nil {
				return nil, err
			}
		}
		if err := line(lat, p99, i, n+" p99", false); err != nil {
			return nil, err
		}
		if err := line(lat, p50, i, n+" p50", true); err != nil {
			return nil, err
		}
	}
	for _, b := range faultBands(res) {
		tp.Add(b)
		lat.Add(b)
	}
	if err := add("throughput.png", "Throughput over time", tp); err != nil {
		return nil, err
	}
	if err := add("latency.png", "Latency percentiles over time", lat); err != nil {
		return nil, err
	}

	cdf := newPlot("Latency CDF", "latency (ms, log scale)", "fraction of requests")
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	plotted := 0
	for i, n := range names {
		h, err := res.Ops[n].Histogram()
		if err != nil {
			return nil, err
		}
		if h.TotalCount() == 0 {
			continue
		}
		if err := line(cdf, cdfPoints(h), i, n, false); err != nil {
			return nil, err
		}
		plotted++
	}
	if plotted == 0 {
		cdf.X.Scale, cdf.X.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
	}
	if err := add("cdf.png", "Latency CDF", cdf); err != nil {
		return nil, err
	}

	if len(res.Steps) > 0 {
		axis, _, _ := strings.Cut(res.Steps[0].Label, "=")
		sp := newPlot("Messages through the queue per step", axis, "messages/s")
		xys := make(plotter.XYs, len(res.Steps))
		for i, s := range res.Steps {
			xys[i] = plotter.XY{X: float64(i), Y: s.Messages}
		}
		if err := line(sp, xys, 0, "messages/s", false); err != nil {
			return nil, err
		}
		labels := make([]string, len(res.Steps))
		for i, s := range res.Steps {
			labels[i] = fmt.Sprint(s.Value)
		}
		sp.NominalX(labels...)
		if err := add("steps.png", "Sweep", sp); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func line(p *plot.Plot, xys plotter.XYs, i int, name string, dashed bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// seriesXYs turns an operation's per-second points into the throughput,
// p50 and p99 curves, x in seconds since the load phase began, each point
// at the end of its second (a first, partial second ends before x = 1).
func seriesXYs(res *result.Result, s []metrics.Point) (rps, p50, p99 plotter.XYs) {
	for _, pt := range s {
		x := float64((pt.T+1)*1000-res.Start) / 1000
		// A second the load phase covers only in part would be drawn as
		// a collapse of throughput; its latencies are still true.
		if fullSecond(res, pt.T) {
			rps = append(rps, plotter.XY{X: x, Y: float64(pt.N)})
		}
		p50 = append(p50, plotter.XY{X: x, Y: pt.P50})
		p99 = append(p99, plotter.XY{X: x, Y: pt.P99})
	}
	return rps, p50, p99
}

// fullSecond says whether the load phase [Start, End) covers all of unix
// second t.
func fullSecond(res *result.Result, t int64) bool {
	return t*1000 >= res.Start && (t+1)*1000 <= res.End
}
