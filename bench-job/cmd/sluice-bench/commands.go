package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"sluice.dev/bench/internal/load"
	"sluice.dev/bench/internal/report"
	"sluice.dev/bench/internal/result"
)

// cmdReport renders plots and report.html into a run directory.
func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice-bench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	faultsFile := fs.String("faults", "", `JSON list of the faults injected during the run, [{"name":..., "at_unix_ms":...}]: measured and marked on the plots`)
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("usage: sluice-bench report [--faults FILE] RUN_DIR (or a summary.json)")}
	}
	dir := fs.Arg(0)
	res, err := result.Load(dir)
	if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
		dir = filepath.Dir(dir) // a summary file: render next to it
	}
	if err != nil {
		return err
	}
	if err := res.Summarize(); err != nil {
		return err
	}
	if *faultsFile != "" {
		faults, err := result.LoadFaults(*faultsFile)
		if err != nil {
			return usageError{err}
		}
		res.Faults = result.AnalyzeFaults(res, faults)
	}
	paths, err := report.Render(dir, res)
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return nil
}

// cmdCompare prints two runs side by side; with --status, a Benchmark's
// status.comparison from the CompareInput document on stdin.
func cmdCompare(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice-bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	status := fs.Bool("status", false, "read {benchmark, results, other} on stdin and print status.comparison as JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *status {
		if fs.NArg() != 0 {
			return usageError{fmt.Errorf("usage: sluice-bench compare --status < INPUT.json")}
		}
		var in result.CompareInput
		if err := json.NewDecoder(stdin).Decode(&in); err != nil {
			return fmt.Errorf("compare input: %w", err)
		}
		c, err := result.Compare(in)
		if err != nil {
			return err
		}
		return writeJSON(stdout, &c)
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Errorf("usage: sluice-bench compare A B (run directories, summaries or termination logs)")}
	}
	var rs [2]*result.Result
	for i := range rs {
		r, err := result.Load(fs.Arg(i))
		if err != nil {
			return err
		}
		if err := r.Summarize(); err != nil {
			return err
		}
		rs[i] = r
	}
	report.Compare(stdout, fs.Arg(0), fs.Arg(1), rs[0], rs[1])
	return nil
}

// cmdMerge merges pods' results exactly and re-checks thresholds.
func cmdMerge(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("sluice-bench merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the merged run directory here (summary.json + CSV)")
	asJSON := fs.Bool("json", true, "print the merged summary as JSON (false: a table)")
	termLog := fs.String("termination-log", "", "also write the merged <= 4 KB summary here")
	minRPS := fs.Float64("min-rps", 0, "threshold: minimum req/s")
	maxP99 := fs.Float64("max-p99", 0, "threshold: maximum p99 ms")
	maxLost := fs.Int64("max-lost", -1, "threshold: maximum lost messages")
	faultsFile := fs.String("faults", "", `JSON list of the faults injected during the run, [{"name":..., "at_unix_ms":...}]: each is measured into "faults"`)
	maxUnavail := fs.Float64("max-unavailable", -1, "threshold: maximum unavailability window of any fault, seconds")
	maxRecovery := fs.Float64("max-recovery", -1, "threshold: maximum time to recover from any fault, seconds")
	status := fs.Bool("status", false, "print what a Benchmark resource shows (results, verdict, verdictReasons, message) instead of the summary")
	ownQueues := fs.Bool("own-queues", false, "every input used queues of its own (--pod-index): delivery counts add up exactly without bitsets")
	if err := fs.Parse(args); err != nil {
		return exitUsage, usageError{err}
	}
	if fs.NArg() == 0 {
		return exitUsage, usageError{fmt.Errorf("usage: sluice-bench merge [--out DIR] [--status] INPUT... (run directories, summary.json or termination logs)")}
	}
	var rs []*result.Result
	for _, p := range fs.Args() {
		r, err := result.Load(p)
		if err != nil {
			return exitFailure, err
		}
		rs = append(rs, r)
	}
	merged, err := result.Merge(rs)
	if err != nil {
		return exitFailure, err
	}
	if *faultsFile != "" {
		faults, err := result.LoadFaults(*faultsFile)
		if err != nil {
			return exitUsage, usageError{err}
		}
		merged.Faults = result.AnalyzeFaults(merged, faults)
	}
	v := &result.Verdict{MinRPS: *minRPS, MaxP99: *maxP99}
	if *maxLost >= 0 {
		v.MaxLost = maxLost
	}
	if *maxUnavail >= 0 {
		v.MaxUnavailable = maxUnavail
	}
	if *maxRecovery >= 0 {
		v.MaxRecovery = maxRecovery
	}
	if *status {
		// Only the given thresholds judge the run, never ones the pods carried.
		merged.Verdict = nil
		st := result.StatusOf(merged, v, *ownQueues)
		if err := writeOutputs(merged, *out, *termLog); err != nil {
			return exitFailure, err
		}
		if err := writeJSON(stdout, &st); err != nil {
			return exitFailure, err
		}
		if st.Verdict != "Pass" {
			return exitThreshold, nil
		}
		return exitOK, nil
	}
	if v.Any() || merged.Move != nil {
		v.Check(merged)
	}
	if err := writeOutputs(merged, *out, *termLog); err != nil {
		return exitFailure, err
	}
	if *asJSON {
		err = writeSummary(stdout, merged, false)
	} else {
		writeTable(stdout, merged)
	}
	if err != nil {
		return exitFailure, err
	}
	if merged.Verdict != nil && !merged.Verdict.Pass {
		return exitThreshold, nil
	}
	return exitOK, nil
}

// cmdScenarios lists the presets and where their parameters come from.
func cmdScenarios(w io.Writer) error {
	names := load.PresetNames()
	sort.Strings(names)
	for _, n := range names {
		p := load.Presets[n]
		fmt.Fprintf(w, "%-30s %s\n%-30s seed: %s\n", n, p.Description, "", p.Seed)
	}
	return nil
}
