package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func TestReportWritesPlotsAndHTML(t *testing.T) {
	url := testenv.Server(t, "memory")
	dir := filepath.Join(t.TempDir(), "run")
	mustRun(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "2", "-pw", "3", "-cw", "3", "-q", "rep", "--out", dir)
	for _, f := range []string{"summary.json", "post.csv", "claim.csv", "delete.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "post.csv"))
	if lines := strings.Count(string(csv), "\n"); lines < 2 || !strings.HasPrefix(string(csv), "elapsed_s,window_s,n,") {
		t.Errorf("post.csv has %d lines:\n%s", lines, csv)
	}
	out := mustRun(t, "report", dir)
	for _, f := range []string{"throughput.png", "latency.png", "cdf.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, pngMagic) {
			t.Errorf("%s: %d bytes, err %v", f, len(b), err)
		}
		if !strings.Contains(out, f) {
			t.Errorf("report did not list %s", f)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data:image/png;base64,", "task-distribution", ">post<", ">claim<", "Delivery"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(string(html), "<script") || strings.Contains(string(html), "http://cdn") {
		t.Error("report.html is not self-contained")
	}

	// Faults injected during the run are measured and shown; a malformed
	// fault list is a usage error, not a report without them.
	sum, err := result.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	faults := filepath.Join(t.TempDir(), "faults.json")
	os.WriteFile(faults, []byte(`[{"name":"delete server pod","at_unix_ms":`+strconv.FormatInt(sum.End-500, 10)+`}]`), 0o644)
	mustRun(t, "report", "--faults", faults, dir)
	if html, _ := os.ReadFile(filepath.Join(dir, "report.html")); !strings.Contains(string(html), "delete server pod") {
		t.Error("report.html does not list the fault")
	}
	// A fault half a second before the run ends leaves no whole second to
	// recover in, however long the run took on a busy machine: a recovery
	// bound is missed (exit 99).
	code, out, errs := cli(t, "merge", "--faults", faults, "--max-recovery", "60", dir)
	merged, err := result.Parse([]byte(out))
	if code != 99 || err != nil {
		t.Fatalf("merge --faults: exit %d, %v\n%s", code, err, errs)
	}
	if len(merged.Faults) != 1 || merged.Faults[0].Name != "delete server pod" || merged.Verdict.Pass ||
		!strings.Contains(strings.Join(merged.Verdict.Failures, ";"), "never recovered") {
		t.Errorf("merge --faults: faults %+v verdict %+v", merged.Faults, merged.Verdict)
	}
	os.WriteFile(faults, []byte(`[{"name":"x","at":1}]`), 0o644)
	if code, _, errs := cli(t, "report", "--faults", faults, dir); code != 2 || !strings.Contains(errs, "faults") {
		t.Errorf("bad fault list: exit %d, stderr %q", code, errs)
	}

	// A sweep gets its per-step plot too.
	sweep := filepath.Join(t.TempDir(), "flood")
	mustRun(t, "run", "--scenario", "flood", "-s", url, "-t", "1", "--sweep", "1,3", "-q", "fl", "--out", sweep)
	mustRun(t, "report", sweep)
	if b, err := os.ReadFile(filepath.Join(sweep, "steps.png")); err != nil || !bytes.HasPrefix(b, pngMagic) {
		t.Errorf("steps.png: %v", err)
	}

	cmp := mustRun(t, "compare", dir, sweep)
	if !strings.Contains(cmp, "B/A") || !strings.Contains(cmp, "post") || !strings.Contains(cmp, "x") {
		t.Errorf("compare output:\n%s", cmp)
	}
}

// samplesByOp rebuilds per-operation histograms from raw sample files,
// counting as successes exactly the statuses sluice-bench counts.
func samplesByOp(t *testing.T, files ...string) (map[string]*hdr.Histogram, map[string]int64) {
	ok := map[string]map[int]bool{"post": {201: true}, "claim": {201: true, 204: true}, "delete": {204: true}, "list": {200: true}}
	hists, reqs := map[string]*hdr.Histogram{}, map[string]int64{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			parts := strings.Split(sc.Text(), ",")
			op := parts[0]
			lat, _ := strconv.ParseInt(parts[2], 10, 64)
			st, _ := strconv.Atoi(parts[3])
			reqs[op]++
			if hists[op] == nil {
				hists[op] = metrics.NewHist()
			}
			if ok[op][st] {
				metrics.RecordMicros(hists[op], lat)
			}
		}
		fh.Close()
	}
	return hists, reqs
}

// Merging two runs equals one run over the union of their samples.
func TestMergeEqualsUnionOfSamples(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		tmp := t.TempDir()
		var dirs, logs, samples []string
		for _, name := range []string{"a", "b"} {
			dir, tl, sm := filepath.Join(tmp, name), filepath.Join(tmp, name+".tl"), filepath.Join(tmp, name+".csv")
			mustRun(t, "run", "--scenario", "task-distribution", "-s", url, "-t", "2", "-pw", "3", "-cw", "3",
				"-q", "merge-"+name, "--out", dir, "--termination-log", tl, "--samples", sm)
			dirs, logs, samples = append(dirs, dir), append(logs, tl), append(samples, sm)
		}
		mdir := filepath.Join(tmp, "merged")
		mustRun(t, append([]string{"merge", "--out", mdir}, dirs...)...)
		merged, err := result.Load(mdir)
		if err != nil {
			t.Fatal(err)
		}
		hists, reqs := samplesByOp(t, samples...)
		for _, op := range []string{"post", "claim", "delete"} {
			m := merged.Ops[op]
			want := hists[op]
			got, err := m.Histogram()
			if err != nil {
				t.Fatal(err)
			}
			if m.Requests != reqs[op] || m.OK != want.TotalCount() {
				t.Errorf("%s: merged requests/ok %d/%d, samples %d/%d", op, m.Requests, m.OK, reqs[op], want.TotalCount())
			}
			for _, q := range []float64{50, 90, 99, 99.9, 100} {
				if g, w := got.ValueAtQuantile(q), want.ValueAtQuantile(q); g != w {
					t.Errorf("%s p%v: merged %d µs, union of samples %d µs", op, q, g, w)
				}
			}
			if got.Mean() != want.Mean() {
				t.Errorf("%s mean: merged %v, union %v", op, got.Mean(), want.Mean())
			}
			var seriesN int64
			for _, p := range m.Series {
				seriesN += p.N
			}
			if seriesN != m.OK {
				t.Errorf("%s: merged per-second series sum to %d, ok is %d", op, seriesN, m.OK)
			}
		}
		if merged.Pods != 2 || merged.Delivery.Lost != 0 || merged.Delivery.Duplicated != 0 ||
			merged.Delivery.Produced != merged.Ops["post"].OK {
			t.Errorf("merged pods %d delivery %+v", merged.Pods, merged.Delivery)
		}

		// The termination logs merge to the same counts; percentiles agree
		// within the precision the log carries (2 digits when trimmed).
		out := mustRun(t, append([]string{"merge"}, logs...)...)
		fromLogs, err := result.Parse([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range logs {
			if b, _ := os.ReadFile(tl); len(b) > result.TermLogLimit {
				t.Errorf("%s is %d bytes", tl, len(b))
			}
		}
		for _, op := range []string{"post", "claim", "delete"} {
			a, b := merged.Ops[op], fromLogs.Ops[op]
			if a.Requests != b.Requests || a.OK != b.OK {
				t.Errorf("%s: logs merge %d/%d, full merge %d/%d", op, b.Requests, b.OK, a.Requests, a.OK)
			}
			if d := b.P99 - a.P99; d > a.P99*0.011 || -d > a.P99*0.011 {
				t.Errorf("%s p99: logs %v vs full %v", op, b.P99, a.P99)
			}
		}
		if fromLogs.Delivery.Produced != merged.Delivery.Produced || fromLogs.Lost != 0 || fromLogs.Duplicated != 0 {
			t.Errorf("logs delivery %+v", fromLogs.Delivery)
		}
	})
}
