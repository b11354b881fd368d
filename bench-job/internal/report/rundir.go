// Package report turns results into files people read: the run directory
// (summary.json and basho_bench-style per-second CSV), PNG plots, a
// self-contained HTML page, and side-by-side comparisons.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sluice.dev/bench/internal/result"
)

// WriteRunDir writes summary.json (everything, series included) and one
// CSV per operation (plus steps.csv for sweeps) into dir.
func WriteRunDir(dir string, res *result.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, result.SummaryFile), b, 0o644); err != nil {
		return err
	}
	for _, name := range result.OpNames(res.Ops) {
		if err := writeSeriesCSV(filepath.Join(dir, name+".csv"), res, res.Ops[name]); err != nil {
			return err
		}
	}
	if len(res.Steps) > 0 {
		return writeStepsCSV(filepath.Join(dir, "steps.csv"), res)
	}
	return nil
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// writeSeriesCSV follows basho_bench's summary layout: elapsed, window,
// count, then latency columns (here in ms) and errors.
func writeSeriesCSV(path string, res *result.Result, o *result.OpResult) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"elapsed_s", "window_s", "n", "rps", "p50_ms", "p90_ms", "p99_ms", "p99_9_ms", "max_ms", "errors"})
	startSec := res.Start / 1000
	for _, p := range o.Series {
		w.Write([]string{strconv.FormatInt(p.T-startSec+1, 10), "1", strconv.FormatInt(p.N, 10), strconv.FormatInt(p.N, 10),
			f3(p.P50), f3(p.P90), f3(p.P99), f3(p.P999), f3(p.Max), strconv.FormatInt(p.Err, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeStepsCSV(path string, res *result.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"step", "value", "duration_s", "messages_per_sec", "op", "ok", "errors", "rps", "p50_ms", "p99_ms", "p99_9_ms", "max_ms"})
	for _, s := range res.Steps {
		for _, n := range result.OpNames(s.Ops) {
			o := s.Ops[n]
			w.Write([]string{s.Label, strconv.FormatInt(s.Value, 10), f3(s.Duration), f3(s.Messages), n,
				strconv.FormatInt(o.OK, 10), strconv.FormatInt(o.Failed, 10), f3(o.ReqsPerSec), f3(o.P50), f3(o.P99), f3(o.P999), f3(o.Max)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
