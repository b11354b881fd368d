package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"sluice.dev/bench/internal/result"
)

// Compare prints A and B side by side with B/A ratios, per operation, as
// seed 003 compares the same workload on bare metal and virtual nodes.
func Compare(w io.Writer, nameA, nameB string, a, b *result.Result) {
	fmt.Fprintf(w, "A: %s (%s, %.1fs)\nB: %s (%s, %.1fs)\n\n", nameA, a.Scenario, a.Duration, nameB, b.Scenario, b.Duration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tmetric\tA\tB\tB/A\t")
	seen := map[string]bool{}
	var names []string
	for _, n := range append(result.OpNames(a.Ops), result.OpNames(b.Ops)...) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, n := range names {
		oa, ob := a.Ops[n], b.Ops[n]
		if oa == nil {
			oa = &result.OpResult{}
		}
		if ob == nil {
			ob = &result.OpResult{}
		}
		for _, m := range []struct {
			k    string
			a, b float64
		}{{"req/s", oa.ReqsPerSec, ob.ReqsPerSec}, {"mean ms", oa.Mean, ob.Mean}, {"p50 ms", oa.P50, ob.P50},
			{"p99 ms", oa.P99, ob.P99}, {"p99.9 ms", oa.P999, ob.P999}, {"max ms", oa.Max, ob.Max},
			{"errors", float64(oa.Failed), float64(ob.Failed)}} {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%s\t\n", n, m.k, m.a, m.b, ratio(m.a, m.b))
		}
	}
	if a.Total != nil && b.Total != nil {
		fmt.Fprintf(tw, "total\treq/s\t%.3f\t%.3f\t%s\t\n", a.Total.ReqsPerSec, b.Total.ReqsPerSec, ratio(a.Total.ReqsPerSec, b.Total.ReqsPerSec))
	}
	if a.Delivery != nil || b.Delivery != nil {
		da, db := a.Delivery, b.Delivery
		if da == nil {
			da = &result.Delivery{}
		}
		if db == nil {
			db = &result.Delivery{}
		}
		fmt.Fprintf(tw, "delivery\tlost\t%d\t%d\t\t\n", da.Lost, db.Lost)
		fmt.Fprintf(tw, "delivery\tduplicated\t%d\t%d\t\t\n", da.Duplicated, db.Duplicated)
	}
	tw.Flush()
}

func ratio(a, b float64) string {
	if a == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", b/a)
}
