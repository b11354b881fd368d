package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// renderRules renders the chart's PrometheusRule and writes its groups as a
// plain Prometheus rule file into dir; it returns the file's path and the
// groups.
func renderRules(t *testing.T, dir string, args ...string) (string, []any) {
	t.Helper()
	out, err := helmTemplate(t, append([]string{"--set", "prometheusRule.enabled=true"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	rule := one(t, parseDocs(t, out), "PrometheusRule")
	groups := get(rule, "spec", "groups").([]any)
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice-rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, groups
}

// ruleExprs lists alert name -> expression.
func ruleExprs(groups []any) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		for _, r := range get(g, "rules").([]any) {
			out[get(r, "alert").(string)] = get(r, "expr").(string)
		}
	}
	return out
}

func TestRulesCheck(t *testing.T) {
	promtool := tool(t, "SLUICE_PROMTOOL")
	path, groups := renderRules(t, t.TempDir())
	if out, err := run(t, promtool, "check", "rules", path); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The alert list, each present.
	alerts := ruleExprs(groups)
	for _, name := range []string{"SluiceQueueBacklogGrowing", "SluiceQueueOldestMessageAge", "SluiceClaimExpirations",
		"SluiceDeadLetterRate", "SluicePoolNotReady", "SluiceServerErrorRatio", "SluiceBenchmarkFailed",
		"SluiceShardMemoryHigh", "SluiceShardFull"} {
		if alerts[name] == "" {
			t.Errorf("PrometheusRule lacks %s", name)
		}
	}
}

// TestRulesUnit runs testdata/alerts_test.yaml: every alert fires on a
// synthetic series that breaks its rule, and not on its neighbours.
func TestRulesUnit(t *testing.T) {
	promtool := tool(t, "SLUICE_PROMTOOL")
	dir := t.TempDir()
	renderRules(t, dir)
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml")); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestRulesThresholdsFromValues: thresholds are values, not constants.
func TestRulesThresholdsFromValues(t *testing.T) {
	_, groups := renderRules(t, t.TempDir(), "--set", "prometheusRule.serverErrorRatio=0.25", "--set", "prometheusRule.oldestMessageAgeSeconds=42",
		"--set", "prometheusRule.memoryHighRatio=0.7", "--set", "prometheusRule.memoryFullRatio=0.95")
	alerts := ruleExprs(groups)
	if !strings.HasSuffix(strings.TrimSpace(alerts["SluiceShardMemoryHigh"]), "> 0.7") {
		t.Errorf("memory warning threshold not taken from values: %s", alerts["SluiceShardMemoryHigh"])
	}
	if !strings.Contains(alerts["SluiceShardFull"], ">= 0.95") {
		t.Errorf("memory full threshold not taken from values: %s", alerts["SluiceShardFull"])
	}
	if !strings.HasSuffix(strings.TrimSpace(alerts["SluiceServerErrorRatio"]), "> 0.25") {
		t.Errorf("5xx ratio threshold not taken from values: %s", alerts["SluiceServerErrorRatio"])
	}
	if !strings.HasSuffix(strings.TrimSpace(alerts["SluiceQueueOldestMessageAge"]), "> 42") {
		t.Errorf("oldest age threshold not taken from values: %s", alerts["SluiceQueueOldestMessageAge"])
	}
}

var rateInterval = regexp.MustCompile(`\$__rate_interval`)

// TestDashboardQueries: every PromQL query of the Grafana dashboard parses
// (checked by promtool as recording rules, with Grafana's variables filled in).
func TestDashboardQueries(t *testing.T) {
	promtool := tool(t, "SLUICE_PROMTOOL")
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "files", "dashboards", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var rules []map[string]string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			expr := rateInterval.ReplaceAllString(tg.Expr, "1m")
			expr = strings.ReplaceAll(expr, "$namespace", ".*")
			rules = append(rules, map[string]string{"record": "dashboard:query", "expr": expr})
		}
	}
	b, _ := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, promtool, "check", "rules", "--lint=none", path); err != nil {
		t.Fatalf("dashboard queries do not parse: %v\n%s", err, out)
	}
}
