package chart

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

// clusterRoleRules are the rules of each ClusterRole of a manifest, by name.
func clusterRoleRules(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc["kind"] == "ClusterRole" {
			out[get(doc, "metadata", "name").(string)] = doc["rules"]
		}
	}
	return out
}

// grants reports whether rules grant verb on resource of the core group.
func grants(rules any, resource, verb string) bool {
	for _, r := range rules.([]any) {
		var res, verbs, groups bool
		for _, g := range get(r, "apiGroups").([]any) {
			groups = groups || g == ""
		}
		for _, x := range get(r, "resources").([]any) {
			res = res || x == resource
		}
		for _, v := range get(r, "verbs").([]any) {
			verbs = verbs || v == verb
		}
		if groups && res && verbs {
			return true
		}
	}
	return false
}

func byKindName(objs []obj) map[string]obj {
	out := map[string]obj{}
	for _, o := range objs {
		key := o["kind"].(string) + "/" + get(o, "metadata", "name").(string)
		if ns, ok := get(o, "metadata", "namespace").(string); ok {
			key += "@" + ns
		}
		out[key] = o
	}
	return out
}

// TestFaultsRBACValues: by default the operator may neither patch nodes nor
// evict pods; benchmarkFaults.namespaces binds the faults ClusterRole in
// exactly those namespaces, benchmarkFaults.nodeDrain the node role
// cluster-wide, each with the rules of the operator's rbac-faults.yaml (of
// which the chart holds a byte-identical copy, make chart-sync).
func TestFaultsRBACValues(t *testing.T) {
	src := filepath.Join(root(t), "operator", "deploy", "rbac-faults.yaml")
	a, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(chartDir(t), "files", "operator-rbac-faults.yaml"))
	if !bytes.Equal(a, b) {
		t.Fatal("charts/sluice/files/operator-rbac-faults.yaml differs from operator/deploy/rbac-faults.yaml: run make chart-sync")
	}
	want := clusterRoleRules(t, src)

	out, err := helmTemplate(t)
	if err != nil {
		t.Fatal(err)
	}
	objs := parseDocs(t, out)
	role := one(t, objs, "ClusterRole")
	if grants(role["rules"], "nodes", "patch") || grants(role["rules"], "pods/eviction", "create") {
		t.Errorf("the default ClusterRole grants nodes patch or pods/eviction create: %v", role["rules"])
	}
	if n := len(kindsOf(objs, "RoleBinding")); n != 0 {
		t.Errorf("defaults render %d RoleBindings, want none", n)
	}

	out, err = helmTemplate(t, "--set", "fullnameOverride=sl", "--set", "benchmarkFaults.namespaces={bench-a,bench-b}")
	if err != nil {
		t.Fatal(err)
	}
	got := byKindName(parseDocs(t, out))
	if r, ok := got["ClusterRole/sl-faults"]; !ok || !reflect.DeepEqual(jsonRound(r["rules"]), jsonRound(want["sluice-operator-faults"])) {
		t.Errorf("ClusterRole sl-faults: %v, want the rules of sluice-operator-faults %v", r, want["sluice-operator-faults"])
	}
	for _, ns := range []string{"bench-a", "bench-b"} {
		rb, ok := got["RoleBinding/sl-faults@"+ns]
		if !ok {
			t.Errorf("no RoleBinding sl-faults in %s", ns)
			continue
		}
		if get(rb, "roleRef", "kind") != "ClusterRole" || get(rb, "roleRef", "name") != "sl-faults" ||
			get(rb, "subjects", 0, "name") != "sl" || get(rb, "subjects", 0, "namespace") != "sluice-system" {
			t.Errorf("RoleBinding in %s does not bind the operator's ServiceAccount to sl-faults: %v", ns, rb)
		}
	}
	if _, ok := got["ClusterRole/sl-node-faults"]; ok {
		t.Error("node faults rendered without benchmarkFaults.nodeDrain")
	}
	if n := len(kindsOf(parseDocs(t, out), "ClusterRoleBinding")); n != 1 {
		t.Errorf("%d ClusterRoleBindings: the faults role must be bound per namespace only", n)
	}

	out, err = helmTemplate(t, "--set", "fullnameOverride=sl", "--set", "benchmarkFaults.nodeDrain=true")
	if err != nil {
		t.Fatal(err)
	}
	got = byKindName(parseDocs(t, out))
	if r := got["ClusterRole/sl-node-faults"]; r == nil || !reflect.DeepEqual(jsonRound(r["rules"]), jsonRound(want["sluice-operator-node-faults"])) {
		t.Errorf("ClusterRole sl-node-faults: %v, want %v", r, want["sluice-operator-node-faults"])
	}
	crb := got["ClusterRoleBinding/sl-node-faults"]
	if get(crb, "roleRef", "name") != "sl-node-faults" || get(crb, "subjects", 0, "name") != "sl" {
		t.Errorf("ClusterRoleBinding sl-node-faults: %v", crb)
	}
	if _, ok := got["ClusterRole/sl-faults"]; ok {
		t.Error("the namespaced faults role rendered without benchmarkFaults.namespaces")
	}
}

// TestMetricsPortValues: the servers' ServiceMonitor scrapes their metrics
// port, and the operator is told which namespaces may reach it.
func TestMetricsPortValues(t *testing.T) {
	out, err := helmTemplate(t, "--set", "serviceMonitor.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	objs := byKindName(parseDocs(t, out))
	sm := objs["ServiceMonitor/sluice-servers@sluice-system"]
	if get(sm, "spec", "endpoints", 0, "port") != "metrics" {
		t.Errorf("the servers' ServiceMonitor scrapes %v, want port metrics", get(sm, "spec", "endpoints", 0, "port"))
	}
	env := envOf(t, objs["Deployment/sluice@sluice-system"])
	var sel map[string]any
	if err := json.Unmarshal([]byte(env["SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR"]), &sel); err != nil {
		t.Fatalf("SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR=%q: %v", env["SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR"], err)
	}
	if get(sel, "matchLabels", "kubernetes.io/metadata.name") != "monitoring" {
		t.Errorf("default metrics namespace selector %v, want the monitoring namespace", sel)
	}
	if _, err := helmTemplate(t, "--set", "networkPolicies.metricsNamespaceSelector.podSelector.x=y"); err == nil {
		t.Error("a metrics namespace selector with an unknown key was accepted")
	}
}
