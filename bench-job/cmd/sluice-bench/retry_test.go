package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/testenv"
)

// answer is one response of retryServer: a status and its Retry-After.
type answer struct {
	status     int
	retryAfter string // "" sends none
}

// retryServer answers its requests with answers in turn and counts what
// it sent, by status, with and without the header.
type retryServer struct {
	answers []answer
	n       atomic.Int64
	mu      sync.Mutex
	sent    map[answer]int64
}

func (s *retryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := s.answers[(s.n.Add(1)-1)%int64(len(s.answers))]
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
	w.Write([]byte(`{"title": "x", "description": "y"}`))
	s.mu.Lock()
	s.sent[a]++
	s.mu.Unlock()
}

// TestRetryAfterCountedFromARealServer: 503 and 507 answers with and
// without Retry-After (delay-seconds, a past HTTP-date, an unreadable
// value) are counted exactly as the server sent them, in the summary, in
// status.results through the termination log and merge --status, in a
// fault's window through the series and merge --faults, and in the report.
// A success carrying Retry-After is not a failure and is not counted.
func TestRetryAfterCountedFromARealServer(t *testing.T) {
	past := "Mon, 02 Jan 2006 15:04:05 GMT"
	srv := &retryServer{sent: map[answer]int64{}, answers: []answer{
		{503, "2"}, {503, ""}, {507, "30"}, {200, ""}, {507, past}, {503, "soon"}, {507, ""}, {200, "5"}, {503, "2"},
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	tl, series := filepath.Join(dir, "tl"), filepath.Join(dir, "series.json")
	out := mustRun(t, "run", "--scenario", "http-baseline", "-s", ts.URL, "--path", "/v2/ping", "-pw", "2", "-t", "1",
		"--termination-log", tl, "--progress", "never", "--json", "--series")
	if err := os.WriteFile(series, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := result.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}

	count := func(status int, header func(string) bool) (n int64) {
		for a, k := range srv.sent {
			if a.status == status && header(a.retryAfter) {
				n += k
			}
		}
		return n
	}
	each := func(string) bool { return true }
	is := func(v string) func(string) bool { return func(h string) bool { return h == v } }
	given := func(h string) bool { return h != "" }
	wantErrors := map[string]int64{"http_503": count(503, each), "http_507": count(507, each)}
	want := map[string]metrics.RetryAfter{
		"http_503": {Responses: count(503, given), Min: 2, Max: 2, Unreadable: count(503, is("soon"))},
		"http_507": {Responses: count(507, given), Min: 0, Max: 30},
	}
	if wantErrors["http_503"] < 3 || want["http_507"].Responses < 2 {
		t.Fatalf("too few answers to judge: %v", srv.sent)
	}
	get := r.Ops["get"]
	if get.OK != count(200, each) || len(get.Errors) != 2 || get.Errors["http_503"] != wantErrors["http_503"] || get.Errors["http_507"] != wantErrors["http_507"] {
		t.Fatalf("summary: ok %d errors %v; server sent %v", get.OK, get.Errors, srv.sent)
	}
	if len(get.RetryAfter) != 2 || get.RetryAfter["http_503"] != want["http_503"] || get.RetryAfter["http_507"] != want["http_507"] {
		t.Fatalf("summary: retry_after %+v, want %+v", get.RetryAfter, want)
	}

	// The operator's path to status.results.
	code, stOut, errs := cli(t, "merge", "--status", "--own-queues", tl)
	if code != exitOK {
		t.Fatalf("merge --status: exit %d: %s", code, errs)
	}
	var st result.Status
	if err := json.Unmarshal([]byte(stOut), &st); err != nil {
		t.Fatal(err)
	}
	if st.Results.ErrorsByReason["http_503"] != wantErrors["http_503"] || st.Results.RetryAfter["http_503"] != want["http_503"] ||
		st.Results.RetryAfter["http_507"] != want["http_507"] {
		t.Errorf("status: errorsByReason %v retryAfter %+v", st.Results.ErrorsByReason, st.Results.RetryAfter)
	}

	// The report's path to status.faults: one fault at the start of the
	// load, whose window is the whole run.
	faults := filepath.Join(dir, "faults.json")
	os.WriteFile(faults, []byte(`[{"name":"shard","at_unix_ms":`+strconv.FormatInt(r.Start, 10)+`}]`), 0o644)
	merged := filepath.Join(dir, "merged")
	mustRun(t, "merge", "--out", merged, "--faults", faults, series)
	sum, err := result.Load(merged)
	if err != nil {
		t.Fatal(err)
	}
	f := sum.Faults[0]
	if f.Errors["http_503"] != wantErrors["http_503"] || f.RetryAfter["http_503"] != want["http_503"] || f.RetryAfter["http_507"] != want["http_507"] {
		t.Errorf("fault: errors %v retry_after %+v", f.Errors, f.RetryAfter)
	}
	mustRun(t, "report", merged)
	html, _ := os.ReadFile(filepath.Join(merged, "report.html"))
	ra := want["http_503"]
	text := "http_503: " + strconv.FormatInt(wantErrors["http_503"], 10) + " (Retry-After on " + strconv.FormatInt(ra.Responses, 10) + ": 2 s, " +
		strconv.FormatInt(ra.Unreadable, 10) + " unreadable)"
	if n := strings.Count(string(html), text); n != 2 { // the operations table and the faults table
		t.Errorf("report.html has %q %d times, want 2", text, n)
	}
	if table := mustRun(t, "merge", "--json=false", series); !strings.Contains(table, "get errors: "+text+", http_507: ") {
		t.Errorf("the table does not say %q:\n%s", text, table)
	}
}

// TestShardDownAnswers503WithRetryAfter: what the fault suite's shard kill
// relies on, with real processes: sluice-server on a Redis that is killed
// under load answers the posts to its queues 503, each with Retry-After,
// and sluice-bench counts every one of them as such.
func TestShardDownAnswers503WithRetryAfter(t *testing.T) {
	addr, stop := testenv.RedisStoppable(t)
	url := testenv.Server(t, "redis://"+addr+"/0")
	// Kill Redis once the load has stored messages (not after a fixed
	// time: a busy machine may take longer to set the queues up).
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if storedMessages(url, "shard-down-0") > 0 {
				break
			}
		}
		stop()
	}()
	r := runJSON(t, "-s", url, "-pp", "1", "-pw", "2", "-cw", "0", "-ow", "0", "-t", "3", "--qno", "1", "-q", "shard-down",
		"--drain", "0s", "--progress", "never")
	<-killed
	post := r.Ops["post"]
	if post.OK == 0 || post.Errors["http_503"] == 0 {
		t.Fatalf("posts %+v: the load did not see the shard both up and down", post)
	}
	if len(post.Errors) != 1 {
		t.Errorf("failures other than 503: %v", post.Errors)
	}
	ra := post.RetryAfter["http_503"]
	if ra.Responses != post.Errors["http_503"] || ra.Unreadable != 0 || ra.Min != ra.Max {
		t.Errorf("%d posts answered 503, Retry-After %+v: want it on every one, one readable delay", post.Errors["http_503"], ra)
	}
}

// storedMessages is the messages a queue holds, 0 when the server cannot say.
func storedMessages(base, queue string) int64 {
	req, _ := http.NewRequest("GET", base+"/v2/queues/"+queue+"/stats", nil)
	req.Header.Set("Client-ID", "5a1f1b2c-0000-4000-8000-00000000beef")
	req.Header.Set("X-Project-ID", "my-lovely-benchmark")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var doc struct {
		Messages struct{ Total int64 } `json:"messages"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return 0
	}
	return doc.Messages.Total
}
