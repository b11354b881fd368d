package chart

import (
	"strings"
	"testing"
	"time"
)

// canI asks the apiserver, impersonating the ServiceAccount, whether it may
// do something (kubectl auth can-i answers yes or no; a subresource is
// --subresource=..., since TYPE/NAME names an object).
func canI(t *testing.T, sa, ns string, args ...string) bool {
	t.Helper()
	cmd := append([]string{"auth", "can-i"}, args...)
	if ns != "" {
		cmd = append(cmd, "-n", ns)
	}
	out, _ := kubectl(t, "", append(cmd, "--as", sa)...)
	// The answer is the last line; a warning may come first (a resource
	// whose CRD the cluster does not have yet is still judged by RBAC).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	switch strings.TrimSpace(lines[len(lines)-1]) {
	case "yes":
		return true
	case "no":
		return false
	}
	t.Fatalf("kubectl auth can-i %v: %s", args, out)
	return false
}

type access struct {
	ns   string // empty: cluster-scoped
	args []string
	want bool
}

// expectAccess waits (bounded: the apiserver's RBAC cache follows new
// bindings within moments) until every answer is the one wanted, then
// reports those that are not.
func expectAccess(t *testing.T, sa string, checks []access) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wrong []access
		for _, c := range checks {
			if canI(t, sa, c.ns, c.args...) != c.want {
				wrong = append(wrong, c)
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, c := range wrong {
				t.Errorf("%s: can-i %v in %q = %v, want %v", sa, c.args, c.ns, !c.want, c.want)
			}
			return
		}
		time.Sleep(time.Second)
	}
}

// TestClusterOperatorRBAC installs the chart on the real apiserver and asks
// it, as the operator's ServiceAccount, what it may do: by default no node
// patch and no eviction anywhere, but everything the examples' Benchmarks
// need (runs, and the kill faults of examples/chaos); with
// benchmarkFaults.namespaces evictions in exactly those namespaces; with
// benchmarkFaults.nodeDrain node patches.
func TestClusterOperatorRBAC(t *testing.T) {
	releaseNs := tempNamespace(t, "chart-rbac")
	bench := tempNamespace(t, "chart-rbac-bench")
	other := tempNamespace(t, "chart-rbac-other")
	release := "sluice-" + suffix()
	sa := "system:serviceaccount:" + releaseNs + ":" + release
	// The operator pod must never run (see TestClusterInstallUpgradeUninstall);
	// what is checked is the RBAC the chart installs.
	common := []string{"--namespace", releaseNs, "--set", "fullnameOverride=" + release, "--set", "crds.install=false",
		"--set-string", "operator.nodeSelector.sluice\\.dev/chart-test=never-scheduled", "--timeout", "2m"}
	if out, err := helmKube(t, append([]string{"install", release, chartDir(t)}, common...)...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = helmKube(t, "uninstall", release, "--namespace", releaseNs) })

	// What a Benchmark run needs in its namespace, and the example's faults
	// (kill server, kill shard: pod deletes).
	runs := []access{
		{bench, []string{"patch", "benchmarks.sluice.dev", "--subresource=status"}, true},
		{bench, []string{"create", "jobs.batch"}, true},
		{bench, []string{"create", "configmaps"}, true},
		{bench, []string{"get", "pods", "--subresource=log"}, true},
		{bench, []string{"list", "pods"}, true},
		{bench, []string{"delete", "pods"}, true},
		{bench, []string{"patch", "deployments.apps"}, true},
		{bench, []string{"create", "events"}, true},
	}
	expectAccess(t, sa, append(runs,
		access{"", []string{"patch", "nodes"}, false},
		access{"", []string{"list", "nodes"}, true},
		access{bench, []string{"create", "pods", "--subresource=eviction"}, false},
		access{other, []string{"create", "pods", "--subresource=eviction"}, false},
		access{releaseNs, []string{"create", "pods", "--subresource=eviction"}, false},
		access{"", []string{"create", "clusterrolebindings.rbac.authorization.k8s.io"}, false},
	))

	if out, err := helmKube(t, append([]string{"upgrade", release, chartDir(t), "--set", "benchmarkFaults.namespaces={" + bench + "}"}, common...)...); err != nil {
		t.Fatalf("helm upgrade with benchmarkFaults.namespaces: %v\n%s", err, out)
	}
	expectAccess(t, sa, append(runs,
		access{bench, []string{"create", "pods", "--subresource=eviction"}, true},
		access{other, []string{"create", "pods", "--subresource=eviction"}, false},
		access{releaseNs, []string{"create", "pods", "--subresource=eviction"}, false},
		access{"", []string{"patch", "nodes"}, false},
	))

	if out, err := helmKube(t, append([]string{"upgrade", release, chartDir(t), "--set", "benchmarkFaults.namespaces={" + bench + "}",
		"--set", "benchmarkFaults.nodeDrain=true"}, common...)...); err != nil {
		t.Fatalf("helm upgrade with benchmarkFaults.nodeDrain: %v\n%s", err, out)
	}
	expectAccess(t, sa, []access{
		{"", []string{"patch", "nodes"}, true},
		{bench, []string{"create", "pods", "--subresource=eviction"}, true},
		{other, []string{"create", "pods", "--subresource=eviction"}, false},
	})

	// Back to the defaults: both grants go with the upgrade.
	if out, err := helmKube(t, append([]string{"upgrade", release, chartDir(t)}, common...)...); err != nil {
		t.Fatalf("helm upgrade to the defaults: %v\n%s", err, out)
	}
	expectAccess(t, sa, []access{
		{"", []string{"patch", "nodes"}, false},
		{bench, []string{"create", "pods", "--subresource=eviction"}, false},
		{bench, []string{"delete", "pods"}, true},
	})
}
