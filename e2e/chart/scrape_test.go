package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// freePort asks the kernel for an unused loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess runs a long-lived process that the test stops (by its own
// PID) when it ends; its output goes to a log file shown on failure.
func startProcess(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (tail):\n%s", filepath.Base(name), b)
		}
	})
}

// waitFor polls f until it returns nil or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// zaqar sends one Zaqar v2 request to the server and returns its status.
func zaqar(t *testing.T, base, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Client-ID", "3381af92-2b9e-11e3-b191-71861300734c")
	req.Header.Set("X-Project-ID", "chart-e2e")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// promAPI calls a Prometheus HTTP API endpoint and decodes its data field.
func promAPI(base, path string, q url.Values, data any) error {
	resp, err := http.Get(base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status    string          `json:"status"`
		Error     string          `json:"error"`
		ErrorType string          `json:"errorType"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return err
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+`)

// operatorMetricsPending are series the rules use that the operator does
// not export yet (none today). The test fails once one of them appears in
// operator/, so the list only ever shrinks.
var operatorMetricsPending = map[string]bool{}

// serverPoolMetrics are series sluice-server exports per pool only when it
// serves a catalog of pools; the server scraped here runs on one memory
// store, so these are looked up in the server's source instead.
var serverPoolMetrics = map[string]bool{
	"sluice_pool_memory_used_bytes": true,
	"sluice_pool_memory_max_bytes":  true,
	"sluice_pool_storage_full":      true,
}

// TestRulesOnRealScrape: a real Prometheus (built from its Go module)
// scrapes a real sluice-server that served Zaqar traffic, loads the chart's
// rendered rules, and evaluates every one of them without error. Every
// series name the rules use must be one that sluice-server exports or the
// operator defines.
func TestRulesOnRealScrape(t *testing.T) {
	prometheus := tool(t, "SLUICE_PROMETHEUS")
	server := tool(t, "SLUICE_SERVER_BIN")
	dir := t.TempDir()
	rulesPath, groups := renderRules(t, dir)

	// The server, with traffic on the routes the alerts are about.
	sport := freePort(t)
	startProcess(t, nil, server, "--listen", fmt.Sprintf("127.0.0.1:%d", sport), "--store", "memory")
	base := fmt.Sprintf("http://127.0.0.1:%d", sport)
	waitFor(t, "sluice-server", 30*time.Second, func() error {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	if c := zaqar(t, base, "PUT", "/v2/queues/chart-e2e", ""); c != 201 && c != 204 {
		t.Fatalf("create queue: %d", c)
	}
	for i := 0; i < 5; i++ {
		if c := zaqar(t, base, "POST", "/v2/queues/chart-e2e/messages", `{"messages":[{"ttl":300,"body":{"n":1}}]}`); c != 201 {
			t.Fatalf("post: %d", c)
		}
	}
	if c := zaqar(t, base, "POST", "/v2/queues/chart-e2e/claims?limit=2", `{"ttl":60,"grace":60}`); c != 201 {
		t.Fatalf("claim: %d", c)
	}
	zaqar(t, base, "GET", "/v2/queues/does-not-exist/messages/0123456789abcdef01234567", "")

	// The operator's own metrics registry, served by its metrics module
	// from its virtualenv, with a Pool and a Queue recorded.
	oport := freePort(t)
	py := tool(t, "SLUICE_OPERATOR_PY")
	// The package is imported from the working tree; the virtualenv brings
	// prometheus_client.
	startProcess(t, []string{"PYTHONPATH=" + filepath.Join(root(t), "operator")}, py, "-c", fmt.Sprintf(`import time
from sluice_operator import metrics
metrics.POOL_READY.labels("chart-e2e", "redis").set(1)
metrics.POOL_SHARDS_READY.labels("chart-e2e", "redis").set(2)
metrics.QUEUE_READY.labels("chart-e2e", "jobs").set(1)
metrics.QUEUE_MESSAGES.labels("chart-e2e", "jobs", "free").set(3)
metrics.QUEUE_OLDEST_AGE.labels("chart-e2e", "jobs").set(12)
metrics.RECONCILES.labels("Pool").inc()
from sluice_operator.handlers import benchmark_results
benchmark_results.LAST_PASS.labels("chart-e2e", "task-distribution").set(1)
metrics.serve(%d)
time.sleep(300)
`, oport))

	// Prometheus scraping both every second and evaluating the rules.
	pport := freePort(t)
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: sluice-server
    static_configs:
      - targets: ["127.0.0.1:%d"]
        labels: {namespace: chart-e2e, pod: sluice-server-0}
  - job_name: sluice-operator
    static_configs:
      - targets: ["127.0.0.1:%d"]
`, rulesPath, sport, oport)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, tool(t, "SLUICE_PROMTOOL"), "check", "config", cfgPath); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	startProcess(t, nil, prometheus, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", pport))
	pbase := fmt.Sprintf("http://127.0.0.1:%d", pport)

	waitFor(t, "successful scrapes of sluice-server and the operator", 60*time.Second, func() error {
		var res struct {
			Result []struct{ Value []any } `json:"result"`
		}
		if err := promAPI(pbase, "/api/v1/query", url.Values{"query": {`up == 1`}}, &res); err != nil {
			return err
		}
		if len(res.Result) != 2 {
			return fmt.Errorf("%d of 2 targets up", len(res.Result))
		}
		return nil
	})

	// Every rule evaluated at least once after the first scrape, healthy.
	start := time.Now()
	type rule struct {
		Name           string    `json:"name"`
		Health         string    `json:"health"`
		LastError      string    `json:"lastError"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	}
	var rules []rule
	waitFor(t, "every rule to be evaluated", 30*time.Second, func() error {
		var res struct {
			Groups []struct{ Rules []rule } `json:"groups"`
		}
		if err := promAPI(pbase, "/api/v1/rules", nil, &res); err != nil {
			return err
		}
		rules = rules[:0]
		for _, g := range res.Groups {
			for _, r := range g.Rules {
				if r.LastEvaluation.Before(start) {
					return fmt.Errorf("%s not evaluated since the first scrape", r.Name)
				}
				rules = append(rules, r)
			}
		}
		if len(rules) != len(ruleExprs(groups)) {
			return fmt.Errorf("%d rules loaded, want %d", len(rules), len(ruleExprs(groups)))
		}
		return nil
	})
	for _, r := range rules {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
		}
	}
	// And each expression queried directly over the scraped series.
	for name, expr := range ruleExprs(groups) {
		var res json.RawMessage
		if err := promAPI(pbase, "/api/v1/query", url.Values{"query": {expr}}, &res); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Series names: the rules only use what exists.
	var names []string
	if err := promAPI(pbase, "/api/v1/label/__name__/values", nil, &names); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]bool{}
	for _, n := range names {
		scraped[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
	}
	for _, want := range []string{"sluice_http_requests_total", "sluice_http_request_duration_seconds", "sluice_claims_expired_total",
		"sluice_dead_letter_moves_total", "sluice_storage_up", "sluice_queue_messages"} {
		if !scraped[want] {
			t.Errorf("sluice-server does not export %s (scraped: %v)", want, sortedSluice(scraped))
		}
	}
	for _, want := range []string{"sluice_pool_ready", "sluice_operator_reconciles_total", "sluice_benchmark_last_verdict_pass"} {
		if !scraped[want] {
			t.Errorf("the operator does not export %s (scraped: %v)", want, sortedSluice(scraped))
		}
	}
	operatorSrc := sources(t, filepath.Join(root(t), "operator", "sluice_operator"), ".py")
	serverSrc := sources(t, filepath.Join(root(t), "server"), ".go")
	used := map[string]bool{}
	for _, expr := range ruleExprs(groups) {
		for _, n := range metricName.FindAllString(expr, -1) {
			used[n] = true
		}
	}
	for n := range used {
		inOperator := bytes.Contains(operatorSrc, []byte(`"`+n+`"`))
		inServer := serverPoolMetrics[n] && bytes.Contains(serverSrc, []byte(`"`+n+`"`))
		switch {
		case serverPoolMetrics[n] && !inServer:
			t.Errorf("rules use %s, which sluice-server's source does not declare", n)
		case inServer:
			// declared by the server, scraped only from a pooled one
		case operatorMetricsPending[n] && (inOperator || scraped[n]):
			t.Errorf("%s now exists: remove it from operatorMetricsPending", n)
		case operatorMetricsPending[n]:
			t.Logf("%s: used by the rules, not exported by the operator yet", n)
		case !scraped[n] && !inOperator:
			t.Errorf("rules use %s, which neither sluice-server exports nor the operator defines", n)
		}
	}
}

func sortedSluice(m map[string]bool) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, "sluice_") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// sources concatenates the files under dir whose names end in ext (tests
// left out), where metric names are declared.
func sources(t *testing.T, dir, ext string) []byte {
	t.Helper()
	var all []byte
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ext) && !strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		return nil
	})
	return all
}
