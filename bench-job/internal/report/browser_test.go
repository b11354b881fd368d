package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// viewport is the browser window the report must fit without scrolling
// sideways.
const viewport = 1280

// chromium finds a headless Chromium (Debian's chromium-headless-shell or
// chromium), or $CHROMIUM.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium-headless-shell", "chromium"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "no headless Chromium: apt-get install chromium-headless-shell, or set CHROMIUM")
	return ""
}

// browse runs Chromium on a file with a bounded time and returns stdout.
func browse(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir=" + t.TempDir(), "--window-size=" + strconv.Itoa(viewport) + ",1000"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errb.String())
	}
	return out.Bytes()
}

// longRun is a finished run whose parameters and error reasons are as long
// as real ones get (a subscriber URL with a query, a wide sweep).
func longRun(t *testing.T) *result.Result {
	t.Helper()
	start := time.UnixMilli(1_700_000_000_400)
	op := metrics.NewOp("post")
	for i := range 3000 {
		at := start.Add(time.Duration(i) * time.Millisecond)
		op.Success(at, time.Duration(200+i%5000)*time.Microsecond)
	}
	// A fault 1.2 s in: 300 ms of refused connections, then 503s.
	for ms := 1250; ms < 1700; ms += 10 {
		reason := "connection_refused"
		if ms >= 1550 {
			reason = "http_503: the queue's shard is unavailable while sluice-server.bench-namespace-with-a-long-name.svc reconnects"
		}
		op.Failure(start.Add(time.Duration(ms)*time.Millisecond), reason)
	}
	res := &result.Result{Scenario: "task-distribution", Target: "http://sluice-server.bench.svc:8888", Pods: 2,
		Start: start.UnixMilli(), End: start.Add(3 * time.Second).UnixMilli(), Duration: 3,
		Ops: map[string]*result.OpResult{"post": result.FromSnapshot(op.Finish())}}
	res.Params.Producer = result.Role{Processes: 2, Workers: 16}
	res.Params.Sweep = []int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}
	res.Params.Subscriber = "http://receiver.bench-namespace-with-a-long-name.svc.cluster.local:8080/hooks/" + strings.Repeat("deliveries-for-queue-", 8) + "?token=" + strings.Repeat("0123456789abcdef", 6)
	if err := res.Summarize(); err != nil {
		t.Fatal(err)
	}
	res.Faults = result.AnalyzeFaults(res, []result.Fault{{Name: "delete sluice-server pod", At: start.Add(1200 * time.Millisecond).UnixMilli()}})
	return res
}

// TestReportReadsInABrowser renders a report and opens it in headless
// Chromium: the page fits the window's width (the parameters and error
// reasons wrap instead of running off the page), every plot decodes as an
// image in the browser, and a screenshot of it is a real picture.
func TestReportReadsInABrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	if _, err := Render(dir, longRun(t)); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	// The report has no scripts; a copy gets one that writes the layout's
	// measurements into the title, which --dump-dom prints.
	probe := `<script>document.title = "width=" + document.documentElement.scrollWidth +
 " images=" + [...document.images].filter(i => i.complete && i.naturalWidth > 0).length + "/" + document.images.length;</script>`
	probed := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(probed, bytes.Replace(page, []byte("</body>"), []byte(probe+"</body>"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := browse(t, bin, "--dump-dom", "file://"+probed)
	m := regexp.MustCompile(`<title>width=(\d+) images=(\d+)/(\d+)</title>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no measurements in the page:\n%.2000s", dom)
	}
	if w, _ := strconv.Atoi(string(m[1])); w > viewport {
		t.Errorf("the report is %d px wide in a %d px window: something runs off the page", w, viewport)
	}
	if string(m[2]) != string(m[3]) || string(m[3]) == "0" {
		t.Errorf("%s of %s plots decoded in the browser", m[2], m[3])
	}

	shot := filepath.Join(dir, "report.png")
	browse(t, bin, "--screenshot="+shot, "file://"+filepath.Join(dir, "report.html"))
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// A blank page is one colour; the rendered report has text and tables.
	colours := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if b.Dx() != viewport || len(colours) < 3 {
		t.Errorf("screenshot %dx%d with %d colours: not a rendered report", b.Dx(), b.Dy(), len(colours))
	}
}

// TestParamsTable lists parameters by their JSON names and leaves out the
// optional ones a run did not set.
func TestParamsTable(t *testing.T) {
	var p result.Params
	p.Producer = result.Role{Processes: 1, Workers: 4}
	p.Time, p.Sweep = 10, []int64{1, 3}
	got := map[string]string{}
	for _, r := range paramRows(p) {
		got[r.Name] = r.Value
	}
	want := map[string]string{"producer": "1 process(es) x 4 worker(s)", "time": "10", "sweep": "1, 3", "claim_ttl": "0"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"rate", "subscriber", "path", "message_size"} {
		if _, ok := got[k]; ok {
			t.Errorf("unset optional %s is listed", k)
		}
	}
}

// TestFaultsAreMarked: a run with a fault gets the Faults table and its
// time-series plots differ from the same run's without it (the band).
func TestFaultsAreMarked(t *testing.T) {
	res := longRun(t)
	with, err := Plots(res)
	if err != nil {
		t.Fatal(err)
	}
	faults := res.Faults
	res.Faults = nil
	without, err := Plots(res)
	if err != nil {
		t.Fatal(err)
	}
	for i := range with {
		marked := with[i].Name == "throughput.png" || with[i].Name == "latency.png"
		if same := bytes.Equal(with[i].PNG, without[i].PNG); same == marked {
			t.Errorf("%s: identical with and without the fault: %v", with[i].Name, same)
		}
	}
	res.Faults = faults
	dir := t.TempDir()
	if _, err := Render(dir, res); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	for _, want := range []string{"<h2>Faults</h2>", "delete sluice-server pod", "connection_refused: 30", ">0.050<", ">1.200<"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
