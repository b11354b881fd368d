package chart

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOperatorAcceptsChartEnv: for every ci/ values file, the environment
// the chart gives the operator is read by the operator's own configuration
// code without error, every SLUICE_OPERATOR_* variable the chart sets is one
// the operator reads, and the values arrive where they should.
func TestOperatorAcceptsChartEnv(t *testing.T) {
	py := tool(t, "SLUICE_OPERATOR_PY")
	src, err := os.ReadFile(filepath.Join(root(t), "operator", "sluice_operator", "config.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ciFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := helmTemplate(t, "-f", f)
			if err != nil {
				t.Fatal(err)
			}
			env := envOf(t, one(t, parseDocs(t, out), "Deployment"))
			for name := range env {
				short := strings.TrimPrefix(name, "SLUICE_OPERATOR_")
				if short == name {
					continue
				}
				if !strings.Contains(string(src), `"`+short+`"`) && !strings.Contains(string(src), `"`+name+`"`) {
					t.Errorf("the chart sets %s, which operator/sluice_operator/config.py does not read", name)
				}
			}
			envJSON, _ := json.Marshal(env)
			script := `import json, sys, dataclasses
from sluice_operator.config import Config
cfg = Config.from_env(json.loads(sys.argv[1]))
print(json.dumps(dataclasses.asdict(cfg), default=list))`
			cmd := exec.Command(py, "-c", script, string(envJSON))
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root(t), "operator"))
			res, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the operator refuses the chart's configuration: %v\n%s", err, res)
			}
			var cfg map[string]any
			if err := json.Unmarshal(res, &cfg); err != nil {
				t.Fatalf("config dump: %v\n%s", err, res)
			}
			checks := map[string]string{
				"metal_label_key":     env["SLUICE_OPERATOR_METAL_LABEL_KEY"],
				"server_image":        env["SLUICE_OPERATOR_SERVER_IMAGE"],
				"bench_image":         env["SLUICE_OPERATOR_BENCH_IMAGE"],
				"default_provisioner": env["SLUICE_OPERATOR_DEFAULT_PROVISIONER"],
				"catalog_uri":         env["SLUICE_OPERATOR_CATALOG_URI"],
			}
			for field, want := range checks {
				if cfg[field] != want {
					t.Errorf("operator config %s = %v, chart set %q", field, cfg[field], want)
				}
			}
			smtp := env["SLUICE_OPERATOR_SMTP_URL"]
			if cfg["smtp_url"] != smtp || cfg["smtp_url_secret"] != env["SLUICE_OPERATOR_SMTP_URL_SECRET"] ||
				cfg["require_confirmation"] != (env["SLUICE_OPERATOR_REQUIRE_CONFIRMATION"] == "true") {
				t.Errorf("operator notifications config smtp_url=%v smtp_url_secret=%v require_confirmation=%v, chart set %q %q %q",
					cfg["smtp_url"], cfg["smtp_url_secret"], cfg["require_confirmation"], smtp,
					env["SLUICE_OPERATOR_SMTP_URL_SECRET"], env["SLUICE_OPERATOR_REQUIRE_CONFIRMATION"])
			}
			if cfg["signed_url_secret"] != env["SLUICE_OPERATOR_SIGNED_URL_SECRET"] {
				t.Errorf("operator signed_url_secret %v, chart set %q", cfg["signed_url_secret"], env["SLUICE_OPERATOR_SIGNED_URL_SECRET"])
			}
			if strings.HasSuffix(f, "production-values.yaml") && (env["SLUICE_OPERATOR_SMTP_URL_SECRET"] != "smtp-relay/url" ||
				env["SLUICE_OPERATOR_SIGNED_URL_SECRET"] != "share-key/key" || cfg["require_confirmation"] != true) {
				t.Errorf("production values: notifications not passed on: %q, %v", env["SLUICE_OPERATOR_SMTP_URL_SECRET"], cfg["require_confirmation"])
			}
			// The pace of queue moves: null in values is "" here and None in the
			// operator (the server's defaults); a 0 rate (no cap) stays 0.
			for field, name := range map[string]string{"migrate_batch": "SLUICE_OPERATOR_MIGRATE_BATCH", "migrate_rate": "SLUICE_OPERATOR_MIGRATE_RATE"} {
				got := ""
				if v, ok := cfg[field].(float64); ok {
					got = strconv.Itoa(int(v))
				}
				if got != env[name] {
					t.Errorf("operator config %s = %v, chart set %s=%q", field, cfg[field], name, env[name])
				}
			}
			if strings.HasSuffix(f, "production-values.yaml") &&
				(env["SLUICE_OPERATOR_MIGRATE_BATCH"] != "100" || env["SLUICE_OPERATOR_MIGRATE_RATE"] != "0") {
				t.Errorf("production values: migration pace not passed on: batch %q rate %q",
					env["SLUICE_OPERATOR_MIGRATE_BATCH"], env["SLUICE_OPERATOR_MIGRATE_RATE"])
			}
			var podSC map[string]any
			_ = json.Unmarshal([]byte(env["SLUICE_OPERATOR_POD_SECURITY_CONTEXT"]), &podSC)
			if got, _ := json.Marshal(cfg["pod_security_context"]); string(got) != mustJSON(podSC) {
				t.Errorf("operator pod_security_context %s, chart set %s", got, mustJSON(podSC))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
