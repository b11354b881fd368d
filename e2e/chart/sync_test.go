package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"

	"sluice.dev/e2e/chart/internal/valuesdoc"
)

// TestCRDsMatchRepository: crds/ is the one source of truth; the chart holds
// byte-identical copies (make chart-sync) and renders them unchanged except
// for its labels and the keep policy.
func TestCRDsMatchRepository(t *testing.T) {
	src, _ := filepath.Glob(filepath.Join(root(t), "crds", "*.yaml"))
	dst, _ := filepath.Glob(filepath.Join(chartDir(t), "files", "crds", "*.yaml"))
	if len(src) == 0 {
		t.Fatal("crds/ holds no CRDs")
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		sort.Strings(out)
		return out
	}
	if !reflect.DeepEqual(names(src), names(dst)) {
		t.Fatalf("chart CRDs %v differ from crds/ %v: run make chart-sync", names(dst), names(src))
	}
	byName := map[string]map[string]any{}
	for _, p := range src {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(filepath.Join(chartDir(t), "files", "crds", filepath.Base(p)))
		if !bytes.Equal(a, b) {
			t.Errorf("charts/sluice/files/crds/%s differs from crds/: run make chart-sync", filepath.Base(p))
		}
		var crd map[string]any
		if err := yaml.Unmarshal(a, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		byName[get(crd, "metadata", "name").(string)] = crd
	}
	out, err := helmTemplate(t)
	if err != nil {
		t.Fatal(err)
	}
	rendered := kindsOf(parseDocs(t, out), "CustomResourceDefinition")
	if len(rendered) != len(byName) {
		t.Fatalf("rendered %d CRDs, crds/ has %d", len(rendered), len(byName))
	}
	for _, crd := range rendered {
		want, ok := byName[get(crd, "metadata", "name").(string)]
		if !ok {
			t.Errorf("rendered CRD %v is not in crds/", get(crd, "metadata", "name"))
			continue
		}
		if !reflect.DeepEqual(jsonRound(crd["spec"]), jsonRound(want["spec"])) {
			t.Errorf("rendered CRD %v has a different spec than crds/", get(crd, "metadata", "name"))
		}
	}
}

// TestRBACMatchesOperator: the chart's ClusterRole grants exactly the rules
// of the operator's own RBAC manifest (the one its integration tests run
// under), once the operator has one.
func TestRBACMatchesOperator(t *testing.T) {
	copyPath := filepath.Join(chartDir(t), "files", "operator-rbac.yaml")
	if src := os.Getenv("SLUICE_OPERATOR_RBAC"); src != "" {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(copyPath)
		if !bytes.Equal(a, b) {
			t.Fatalf("charts/sluice/files/operator-rbac.yaml differs from %s: run make chart-sync", src)
		}
	} else {
		t.Log("the operator has no RBAC manifest yet; the chart's own rules are checked against its rendering only")
	}
	raw, _ := os.ReadFile(copyPath)
	var want []any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc["kind"] == "ClusterRole" {
			want = append(want, doc["rules"].([]any)...)
		}
	}
	if len(want) == 0 {
		t.Fatal("files/operator-rbac.yaml holds no ClusterRole rules")
	}
	out, err := helmTemplate(t)
	if err != nil {
		t.Fatal(err)
	}
	objs := parseDocs(t, out)
	role := one(t, objs, "ClusterRole")
	if !reflect.DeepEqual(jsonRound(role["rules"]), jsonRound(want)) {
		t.Errorf("rendered ClusterRole rules differ from files/operator-rbac.yaml")
	}
	for _, r := range role["rules"].([]any) {
		for _, v := range get(r, "verbs").([]any) {
			if v == "*" {
				t.Errorf("rule %v grants every verb", r)
			}
		}
		for _, res := range get(r, "resources").([]any) {
			if res == "*" {
				t.Errorf("rule %v grants every resource", r)
			}
		}
	}
	binding := one(t, objs, "ClusterRoleBinding")
	sa := one(t, objs, "ServiceAccount")
	if get(binding, "subjects", 0, "name") != get(sa, "metadata", "name") || get(binding, "roleRef", "name") != get(role, "metadata", "name") {
		t.Errorf("ClusterRoleBinding %v does not bind the operator's ServiceAccount to its ClusterRole", binding)
	}
	d := one(t, objs, "Deployment")
	if get(d, "spec", "template", "spec", "serviceAccountName") != get(sa, "metadata", "name") {
		t.Error("the operator does not run under its ServiceAccount")
	}
}

// TestValuesTableInSync: README.md's table is what values.yaml's comments
// generate (make chart-docs), and every value is documented.
func TestValuesTableInSync(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := valuesdoc.Rows(values)
	if err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := valuesdoc.Splice(string(readme), valuesdoc.Table(rows))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Fatal("charts/sluice/README.md values table is out of date: run make chart-docs")
	}
}

// TestSchemaCoversValues: every key of values.yaml is declared in
// values.schema.json, so the strict schema never rejects the defaults'
// own keys and a typo in a key is refused.
func TestSchemaCoversValues(t *testing.T) {
	values, _ := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	rows, err := valuesdoc.Rows(values)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	var schema map[string]any
	if err := yaml.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		node := any(schema)
		for _, part := range splitKey(r.Key) {
			node = get(node, "properties", part)
			if node == nil {
				t.Errorf("values.schema.json does not declare %s", r.Key)
				break
			}
		}
	}
}

func splitKey(k string) []string {
	var out []string
	start := 0
	for i := 0; i < len(k); i++ {
		if k[i] == '.' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return append(out, k[start:])
}
