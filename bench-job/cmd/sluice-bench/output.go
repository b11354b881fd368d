package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"sluice.dev/bench/internal/result"
)

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeSummary prints the summary; per-second series stay in the run
// directory unless withSeries.
func writeSummary(w io.Writer, res *result.Result, withSeries bool) error {
	out := *res
	if !withSeries {
		out.Ops = map[string]*result.OpResult{}
		for k, v := range res.Ops {
			c := *v
			c.Series = nil
			out.Ops[k] = &c
		}
	}
	return writeJSON(w, &out)
}

// writeZaqarText mimics zaqar-bench --debug: one block per worker type,
// sorted keys, one decimal.
func writeZaqarText(w io.Writer, res *result.Result) {
	for _, b := range []struct {
		name string
		m    map[string]float64
	}{{"Producer", res.Producer}, {"Observer", res.Observer}, {"Consumer", res.Consumer}} {
		if b.m["duration_sec"] == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\n%s\n", b.name, "========"[:len(b.name)])
		keys := make([]string, 0, len(b.m))
		for k := range b.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %.1f\n", k, b.m[k])
		}
		fmt.Fprintln(w)
	}
}

// writeTable prints a human summary.
func writeTable(w io.Writer, res *result.Result) {
	fmt.Fprintf(w, "scenario %s  target %s  duration %.2fs  pods %d\n\n", res.Scenario, res.Target, res.Duration, res.Pods)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\trequests\tok\terrors\treq/s\tmean ms\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, n := range result.OpNames(res.Ops) {
		o := res.Ops[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
			n, o.Requests, o.OK, o.Failed, o.ReqsPerSec, o.Mean, o.P50, o.P90, o.P99, o.P999, o.Max)
	}
	tw.Flush()
	for _, n := range result.OpNames(res.Ops) {
		if o := res.Ops[n]; len(o.Errors) > 0 {
			fmt.Fprintf(w, "%s errors: %s\n", n, result.Reasons(o.Errors, o.RetryAfter))
		}
	}
	if len(res.Steps) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tmessages/s\tpost p50\tpost p99\tclaim p99\tdelete p99\t")
		for _, s := range res.Steps {
			p99 := func(op string) float64 {
				if o := s.Ops[op]; o != nil {
					return o.P99
				}
				return 0
			}
			p50 := 0.0
			if o := s.Ops["post"]; o != nil {
				p50 = o.P50
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", s.Label, s.Messages, p50, p99("post"), p99("claim"), p99("delete"))
		}
		tw.Flush()
	}
	if d := res.Delivery; d != nil {
		fmt.Fprintf(w, "\ndelivery: produced %d  consumed %d  lost %d  duplicated %d  e2e p50 %.3f ms  p99 %.3f ms\n",
			d.Produced, d.Consumed, d.Lost, d.Duplicated, d.E2E.P50, d.E2E.P99)
	}
	if m := res.Move; m != nil {
		fmt.Fprintf(w, "\nmove to pool %s: %s, %d queues, %d messages moved in %.2f s; p99 before %.3f ms, during %.3f ms\n",
			m.Pool, m.State, m.Queues, m.Moved, m.Duration, m.P99Before, m.P99During)
		if m.Error != "" {
			fmt.Fprintf(w, "move error: %s\n", m.Error)
		}
	}
	if res.Dropped > 0 {
		fmt.Fprintf(w, "open loop: %d arrivals dropped (no idle worker at their start time)\n", res.Dropped)
	}
	if v := res.Verdict; v != nil {
		verdict := "PASS"
		if !v.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "thresholds: %s %v\n", verdict, v.Failures)
	}
}
