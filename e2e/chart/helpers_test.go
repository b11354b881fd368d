package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// root is the repository root, found from this file's location so the tests
// run from any directory.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func chartDir(t *testing.T) string { return filepath.Join(root(t), "charts", "sluice") }

// tool returns the path of a binary named by an environment variable that
// the Makefile sets. Missing tools fail under CI=true and skip elsewhere.
func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := env + " does not name an existing binary (run the tests through `make test-chart`, which builds it)"
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// run executes a command and returns its stdout; stderr comes back in err.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(err.Error() + ": " + stderr.String() + out.String())
	}
	return out.String(), nil
}

// helmTemplate renders the chart with extra helm arguments.
func helmTemplate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	base := []string{"template", "sluice", chartDir(t), "--namespace", "sluice-system"}
	return run(t, tool(t, "SLUICE_HELM"), append(base, args...)...)
}

// obj is one rendered Kubernetes object.
type obj = map[string]any

// parseDocs splits a multi-document YAML stream into objects.
func parseDocs(t *testing.T, s string) []obj {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(s))
	var out []obj
	for {
		var o obj
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("rendered YAML does not parse: %v", err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
}

// get walks a path of map keys and list indexes.
func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func kindsOf(objs []obj, kind string) []obj {
	var out []obj
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, objs []obj, kind string) obj {
	t.Helper()
	ks := kindsOf(objs, kind)
	if len(ks) != 1 {
		t.Fatalf("want exactly one %s, rendered %d", kind, len(ks))
	}
	return ks[0]
}

// envOf maps the operator container's env names to literal values.
func envOf(t *testing.T, deploy obj) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range get(deploy, "spec", "template", "spec", "containers", 0, "env").([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		} else {
			env[m["name"].(string)] = ""
		}
	}
	return env
}

// inCI reports whether the tests run under CI: CI set to a non-empty value
// other than 0 or false (any case), as in the server's testutil and the
// Python test support.
func inCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "0" && v != "false"
}
