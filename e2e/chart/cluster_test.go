package chart

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The TestCluster* tests need a running apiserver: `make test-chart-cluster`
// starts the local control plane (make controlplane-up) and passes its
// kubeconfig. They are not part of the offline `make test-chart` run.

func kubeconfig(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("SLUICE_KUBECONFIG")
	if kc == "" {
		t.Fatal("SLUICE_KUBECONFIG is not set: run through `make test-chart-cluster`, which starts the control plane")
	}
	if _, err := os.Stat(kc); err != nil {
		t.Fatalf("kubeconfig %s: %v", kc, err)
	}
	return kc
}

func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	k := tool(t, "SLUICE_KUBECTL")
	cmd := exec.Command(k, append([]string{"--kubeconfig", kubeconfig(t), "--request-timeout=60s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func helmKube(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, tool(t, "SLUICE_HELM"), append(args, "--kubeconfig", kubeconfig(t))...)
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tempNamespace creates a namespace that is deleted when the test ends.
func tempNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := prefix + "-" + suffix()
	if out, err := kubectl(t, "", "create", "namespace", ns); err != nil {
		t.Fatalf("create namespace: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	return ns
}

// hasAPI reports whether the apiserver serves a group/version.
func hasAPI(t *testing.T, gv string) bool {
	out, err := kubectl(t, "", "api-versions")
	if err != nil {
		t.Fatalf("kubectl api-versions: %v\n%s", err, out)
	}
	for _, l := range strings.Fields(out) {
		if l == gv {
			return true
		}
	}
	return false
}

// TestClusterServerDryRun: every object the chart renders, for every ci/
// values file, is accepted by a real apiserver (server-side dry-run: schema,
// defaulting and admission, nothing stored).
func TestClusterServerDryRun(t *testing.T) {
	ns := tempNamespace(t, "chart-dryrun")
	monitoring := hasAPI(t, "monitoring.coreos.com/v1") || installMonitoringCRDs(t)
	for _, f := range ciFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := run(t, tool(t, "SLUICE_HELM"), "template", "dry-"+suffix(), chartDir(t), "--namespace", ns, "-f", f)
			if err != nil {
				t.Fatal(err)
			}
			var keep []string
			for _, doc := range strings.Split(out, "\n---") {
				if !monitoring && strings.Contains(doc, "apiVersion: monitoring.coreos.com/") {
					t.Logf("monitoring.coreos.com/v1 is not served here: not sending %s", firstLine(doc, "kind:"))
					continue
				}
				if strings.Contains(doc, "namespace: monitoring") {
					doc = strings.ReplaceAll(doc, "namespace: monitoring", "namespace: "+ns)
				}
				keep = append(keep, doc)
			}
			// --force-conflicts: the CRDs may already be on the cluster,
			// owned by another field manager (an earlier install, the
			// operator's suites); who manages them is not what this checks.
			if res, err := kubectl(t, strings.Join(keep, "\n---"), "apply", "--dry-run=server", "--server-side", "--force-conflicts", "--field-manager=chart-test", "-f", "-"); err != nil {
				t.Fatalf("server-side dry-run refused the chart: %v\n%s", err, res)
			}
		})
	}
}

// The prometheus-operator module pinned (with its checksum) beside the
// operator's integration suite, and the CRDs of the kinds the chart renders.
const (
	promOperatorModule = "github.com/prometheus-operator/prometheus-operator"
	promOperatorCRDs   = "example/prometheus-operator-crd"
)

var monitoringCRDs = []string{"servicemonitors", "prometheusrules"}

// installMonitoringCRDs installs prometheus-operator's own ServiceMonitor and
// PrometheusRule CRDs for the test, so that the dry-run checks the chart's
// monitoring objects against the real schemas; they are deleted afterwards.
// False when the module cannot be fetched (a failure under CI=true).
func installMonitoringCRDs(t *testing.T) bool {
	t.Helper()
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "mod", "download", "-json", promOperatorModule)
	cmd.Dir = filepath.Join(root(t), "operator", "tests", "integration", "upstream")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		msg := "prometheus-operator's CRDs unavailable (go mod download " + promOperatorModule + "): " + mod.Error
		if err != nil {
			msg += " " + err.Error()
		}
		if inCI() {
			t.Fatal(msg)
		}
		t.Log(msg)
		return false
	}
	var files, names []string
	for _, plural := range monitoringCRDs {
		files = append(files, "-f", filepath.Join(mod.Dir, promOperatorCRDs, "monitoring.coreos.com_"+plural+".yaml"))
		names = append(names, "crd/"+plural+".monitoring.coreos.com")
	}
	// Server-side: the schemas are too large for kubectl's last-applied annotation.
	if res, err := kubectl(t, "", append([]string{"apply", "--server-side", "--field-manager=chart-test"}, files...)...); err != nil {
		t.Fatalf("install prometheus-operator's CRDs: %v\n%s", err, res)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "", append([]string{"delete", "--timeout=60s"}, names...)...) })
	if res, err := kubectl(t, "", append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, names...)...); err != nil {
		t.Fatalf("prometheus-operator's CRDs not established: %v\n%s", err, res)
	}
	t.Logf("validating against prometheus-operator's own CRDs from %s", filepath.Base(mod.Dir))
	return true
}

func firstLine(doc, prefix string) string {
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix))
		}
	}
	return "?"
}

// previousChart extracts the chart as of the last commit before HEAD that
// changed it (or HEAD itself when it has one version only). Commits whose
// chart does not even render (a broken intermediate state that was fixed in
// the next commit) cannot have been installed by anyone: they are skipped, up
// to a few commits back.
func previousChart(t *testing.T) string {
	t.Helper()
	r := root(t)
	revs, err := exec.Command("git", "-C", r, "log", "-n", "8", "--format=%H", "--", "charts/sluice").Output()
	fields := strings.Fields(string(revs))
	if err != nil || len(fields) == 0 {
		t.Fatalf("no committed chart to upgrade from: %v", err)
	}
	if len(fields) > 1 {
		fields = fields[1:]
	}
	for _, rev := range fields {
		dir := t.TempDir()
		archive := exec.Command("bash", "-c", "git -C \"$1\" archive \"$2\" charts/sluice | tar -x -C \"$3\"", "_", r, rev, dir)
		if out, err := archive.CombinedOutput(); err != nil {
			t.Fatalf("git archive %s: %v\n%s", rev, err, out)
		}
		chart := filepath.Join(dir, "charts", "sluice")
		if _, err := run(t, tool(t, "SLUICE_HELM"), "template", "prev", chart); err != nil {
			t.Logf("skipping the chart of commit %s: it does not render: %v", rev[:12], err)
			continue
		}
		t.Logf("upgrading from the chart of commit %s", rev[:12])
		return chart
	}
	t.Fatalf("none of the charts of commits %v renders", fields)
	return ""
}

// TestClusterInstallUpgradeUninstall: install the previous chart version,
// upgrade to the working tree, uninstall; only the CRDs stay behind.
func TestClusterInstallUpgradeUninstall(t *testing.T) {
	ns := tempNamespace(t, "chart-e2e")
	release := "sluice-" + suffix()
	// CRDs applied from crds/ by other suites belong to no release; Helm
	// would refuse to adopt them, so the chart then leaves them alone.
	crdArgs := []string{}
	if out, err := kubectl(t, "", "get", "crd", "pools.sluice.dev", "-o", "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}"); err == nil {
		crdArgs = []string{"--set", "crds.install=false"}
		t.Logf("CRDs already installed (release %q): installing with crds.install=false", strings.TrimSpace(out))
	}
	// The operator pod must never run here: on a full cluster it would
	// reconcile the Pools of other suites next to their own operator. A
	// nodeSelector no node carries keeps it Pending.
	common := append([]string{"--namespace", ns, "--set", "fullnameOverride=" + release,
		"--set-string", "operator.nodeSelector.sluice\\.dev/chart-test=never-scheduled"}, crdArgs...)
	if out, err := helmKube(t, append([]string{"install", release, previousChart(t), "--timeout", "2m"}, common...)...); err != nil {
		t.Fatalf("helm install (previous chart): %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = helmKube(t, "uninstall", release, "--namespace", ns) })
	out, err := helmKube(t, append([]string{"upgrade", release, chartDir(t), "--timeout", "2m", "--set", "server.replicas=3"}, common...)...)
	if err != nil {
		t.Fatalf("helm upgrade to the working tree: %v\n%s", err, out)
	}
	// Default values authenticate with ServiceAccount tokens, and the notes say how.
	if !strings.Contains(out, `serviceAccountToken: {audience: sluice`) || strings.Contains(out, "WARNING") {
		t.Errorf("the default install's notes do not show the ServiceAccount token to project, or warn:\n%s", out)
	}
	// auth.mode none works only on request, and says what it gives away.
	out, err = helmKube(t, append([]string{"upgrade", release, chartDir(t), "--dry-run=server", "--set", "auth.mode=none"}, common...)...)
	if err != nil || !strings.Contains(out, `WARNING: auth.mode is "none"`) {
		t.Errorf("helm upgrade --set auth.mode=none does not warn (%v):\n%s", err, out)
	}
	env, err := kubectl(t, "", "-n", ns, "get", "deploy", release, "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="SLUICE_OPERATOR_SERVER_REPLICAS")].value}`)
	if err != nil || strings.TrimSpace(env) != "3" {
		t.Fatalf("upgrade did not reach the Deployment: SLUICE_OPERATOR_SERVER_REPLICAS=%q (%v)", env, err)
	}
	for _, obj := range []string{"clusterrole/" + release, "clusterrolebinding/" + release} {
		if out, err := kubectl(t, "", "get", obj); err != nil {
			t.Errorf("%s missing after install: %s", obj, out)
		}
	}
	if out, err := helmKube(t, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	sel := "app.kubernetes.io/instance=" + release
	left, err := kubectl(t, "", "get", "deploy,rs,pods,svc,sa,cm,secret,clusterrole,clusterrolebinding", "-A", "-l", sel, "-o", "name")
	if err != nil {
		t.Fatalf("list leftovers: %v\n%s", err, left)
	}
	if strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left objects behind:\n%s", left)
	}
	if len(crdArgs) == 0 {
		for _, crd := range []string{"pools.sluice.dev", "queues.sluice.dev", "benchmarks.sluice.dev"} {
			if out, err := kubectl(t, "", "get", "crd", crd); err != nil {
				t.Errorf("CRD %s was deleted by helm uninstall (resource-policy keep): %s", crd, out)
			}
		}
	}
}

// TestClusterExamplesValid: examples/ (what `make up` applies, and the
// ones in its subfolders) passes the CRDs' schemas and validation rules on a
// real apiserver.
func TestClusterExamplesValid(t *testing.T) {
	if _, err := kubectl(t, "", "get", "crd", "pools.sluice.dev"); err != nil {
		if out, err := kubectl(t, "", "apply", "-f", filepath.Join(root(t), "crds")); err != nil {
			t.Fatalf("install CRDs: %v\n%s", err, out)
		}
		if out, err := kubectl(t, "", "wait", "--for=condition=Established", "crd/pools.sluice.dev", "crd/queues.sluice.dev", "crd/benchmarks.sluice.dev", "--timeout=60s"); err != nil {
			t.Fatalf("CRDs not established: %v\n%s", err, out)
		}
	}
	ns := tempNamespace(t, "chart-examples")
	files, _ := filepath.Glob(filepath.Join(root(t), "examples", "*.yaml"))
	// Examples `make up` does not apply (examples/chaos) must be valid too.
	more, _ := filepath.Glob(filepath.Join(root(t), "examples", "*", "*.yaml"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("examples/ is empty")
	}
	kinds := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(raw)
		if strings.Contains(doc, "\nkind: Namespace") {
			continue
		}
		kinds[firstLine(doc, "kind:")] = true
		doc = strings.ReplaceAll(doc, "namespace: sluice-demo", "namespace: "+ns)
		if out, err := kubectl(t, doc, "apply", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("%s is refused by the apiserver: %v\n%s", filepath.Base(f), err, out)
		}
	}
	for _, k := range []string{"Pool", "Queue", "Benchmark"} {
		if !kinds[k] {
			t.Errorf("examples/ has no %s", k)
		}
	}
}
