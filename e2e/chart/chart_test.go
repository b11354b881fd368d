package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func ciFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in charts/sluice/ci: %v", err)
	}
	return files
}

func TestLint(t *testing.T) {
	helm := tool(t, "SLUICE_HELM")
	for _, f := range append([]string{""}, ciFiles(t)...) {
		args := []string{"lint", "--strict", chartDir(t)}
		if f != "" {
			args = append(args, "-f", f)
		}
		if out, err := run(t, helm, args...); err != nil {
			t.Errorf("helm lint %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}

// TestTemplateCIValues renders the chart with every ci/ values file and
// checks the properties the chart promises for each of them.
func TestTemplateCIValues(t *testing.T) {
	for _, f := range ciFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := helmTemplate(t, "-f", f)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var vals map[string]any
			if err := yaml.Unmarshal(raw, &vals); err != nil {
				t.Fatal(err)
			}
			checkRendered(t, parseDocs(t, out), vals)
		})
	}
}

func checkRendered(t *testing.T, objs []obj, vals map[string]any) {
	common, _ := vals["commonLabels"].(map[string]any)
	for _, o := range objs {
		name := o["kind"].(string) + "/" + get(o, "metadata", "name").(string)
		labels, _ := get(o, "metadata", "labels").(map[string]any)
		for k, v := range common {
			if labels[k] != v {
				t.Errorf("%s lacks commonLabel %s=%v", name, k, v)
			}
		}
		if labels["app.kubernetes.io/part-of"] != "sluice" {
			t.Errorf("%s lacks app.kubernetes.io/part-of=sluice", name)
		}
	}

	d := one(t, objs, "Deployment")
	if get(d, "spec", "replicas") != 1 || get(d, "spec", "strategy", "type") != "Recreate" {
		t.Errorf("operator Deployment: replicas %v strategy %v, want 1 and Recreate", get(d, "spec", "replicas"), get(d, "spec", "strategy", "type"))
	}
	pod := get(d, "spec", "template", "spec")
	if get(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("operator pod may run as root")
	}
	c := get(pod, "containers", 0)
	if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("operator container securityContext %v", get(c, "securityContext"))
	}
	// The selector must not contain commonLabels: they may change on upgrade.
	for k := range common {
		if _, ok := get(d, "spec", "selector", "matchLabels").(map[string]any)[k]; ok {
			t.Errorf("Deployment selector includes commonLabel %s", k)
		}
	}

	// The operator gets its configuration, and the security contexts for the
	// pods it creates, from the values.
	env := envOf(t, d)
	wantMetal := "sluice.dev/node-class"
	if v, ok := vals["metalLabelKey"].(string); ok {
		wantMetal = v
	}
	if env["SLUICE_OPERATOR_METAL_LABEL_KEY"] != wantMetal {
		t.Errorf("SLUICE_OPERATOR_METAL_LABEL_KEY=%q want %q", env["SLUICE_OPERATOR_METAL_LABEL_KEY"], wantMetal)
	}
	for _, k := range []string{"SLUICE_OPERATOR_POD_SECURITY_CONTEXT", "SLUICE_OPERATOR_CONTAINER_SECURITY_CONTEXT",
		"SLUICE_OPERATOR_SERVER_PLACEMENT", "SLUICE_OPERATOR_SERVER_RESOURCES", "SLUICE_OPERATOR_COMMON_LABELS"} {
		var x map[string]any
		if err := json.Unmarshal([]byte(env[k]), &x); err != nil {
			t.Errorf("%s=%q is not a JSON object: %v", k, env[k], err)
		}
	}
	var podSC map[string]any
	_ = json.Unmarshal([]byte(env["SLUICE_OPERATOR_POD_SECURITY_CONTEXT"]), &podSC)
	if !reflect.DeepEqual(jsonRound(podSC), jsonRound(get(pod, "securityContext"))) {
		t.Errorf("pods the operator creates get %v, its own pod %v", podSC, get(pod, "securityContext"))
	}
	var labelsEnv map[string]any
	_ = json.Unmarshal([]byte(env["SLUICE_OPERATOR_COMMON_LABELS"]), &labelsEnv)
	if len(common) > 0 && !reflect.DeepEqual(labelsEnv, common) {
		t.Errorf("SLUICE_OPERATOR_COMMON_LABELS=%v want %v", labelsEnv, common)
	}
	if secrets, ok := vals["imagePullSecrets"].([]any); ok && len(secrets) > 0 {
		if get(pod, "imagePullSecrets") == nil || !strings.Contains(env["SLUICE_OPERATOR_IMAGE_PULL_SECRETS"], get(secrets, 0, "name").(string)) {
			t.Errorf("imagePullSecrets not given to the operator pod and the operator: %v", env["SLUICE_OPERATOR_IMAGE_PULL_SECRETS"])
		}
	}

	// CRDs: present unless disabled, always kept on uninstall.
	crds := kindsOf(objs, "CustomResourceDefinition")
	wantCRDs := 3
	if get(vals, "crds", "install") == false {
		wantCRDs = 0
	}
	if len(crds) != wantCRDs {
		t.Errorf("rendered %d CRDs, want %d", len(crds), wantCRDs)
	}
	for _, crd := range crds {
		if get(crd, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
			t.Errorf("CRD %v lacks helm.sh/resource-policy: keep", get(crd, "metadata", "name"))
		}
	}
	wantRBAC := 1
	if get(vals, "rbac", "create") == false {
		wantRBAC = 0
	}
	if n := len(kindsOf(objs, "ClusterRole")); n != wantRBAC {
		t.Errorf("rendered %d ClusterRoles, want %d", n, wantRBAC)
	}
	if get(vals, "serviceMonitor", "enabled") == true {
		sms := kindsOf(objs, "ServiceMonitor")
		if len(sms) != 2 {
			t.Fatalf("want ServiceMonitors for the operator and the servers, got %d", len(sms))
		}
		for _, sm := range sms {
			for k, v := range get(vals, "serviceMonitor", "labels").(map[string]any) {
				if get(sm, "metadata", "labels", k) != v {
					t.Errorf("ServiceMonitor %v lacks selectable label %s=%v", get(sm, "metadata", "name"), k, v)
				}
			}
		}
		if env["SLUICE_OPERATOR_SERVICE_MONITOR"] != "false" {
			t.Error("with the chart's server ServiceMonitor the operator must not add its own per namespace")
		}
	} else if len(kindsOf(objs, "ServiceMonitor")) != 0 {
		t.Error("ServiceMonitor rendered while serviceMonitor.enabled is false")
	}
	if get(vals, "grafanaDashboard", "enabled") == true {
		cm := one(t, objs, "ConfigMap")
		var dash map[string]any
		if err := json.Unmarshal([]byte(get(cm, "data", "sluice.json").(string)), &dash); err != nil || len(dash["panels"].([]any)) == 0 {
			t.Errorf("dashboard ConfigMap holds no dashboard: %v", err)
		}
	}
}

func jsonRound(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestSchemaRejectsBadValues: values.schema.json turns mistakes into a clear
// failure of helm install/template that names the offending value.
func TestSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		set, want string
	}{
		{"server.replicas=0", "replicas"},
		{"server.replicas=many", "replicas"},
		{"server.placement.nodeClass=cloud", "nodeClass"},
		{"server.placement.policy=sometimes", "policy"},
		{"defaultProvisioner=helm", "defaultProvisioner"},
		{"operator.image.pullPolicy=Sometimes", "pullPolicy"},
		{"operator.logLevel=LOUD", "logLevel"},
		{"podSecurityContext.runAsNonRoot=false", "runAsNonRoot"},
		{"podSecurityContext.runAsUser=0", "runAsUser"},
		{"containerSecurityContext.allowPrivilegeEscalation=true", "allowPrivilegeEscalation"},
		{"containerSecurityContext.readOnlyRootFilesystem=false", "readOnlyRootFilesystem"},
		{"containerSecurityContext.privileged=true", "privileged"},
		{"catalog.uri=postgres://db/x", "uri"},
		{"metalLabelKey=", "metalLabelKey"},
		{"serviceMonitor.interval=often", "interval"},
		{"prometheusRule.serverErrorRatio=2", "serverErrorRatio"},
		{"imagePullSecrets[0]=plain-string", "imagePullSecrets"},
		{"commonLabels.bad\\ key=x", "bad key"},
		{"serverReplicas=3", "serverReplicas"},
		{"operator.replicas=2", "replicas"},
		{"server.resources.requests.cpu=lots", "cpu"},
		{"server.migration.batch=0", "batch"},
		{"server.migration.batch=20000", "batch"},
		{"server.migration.rate=-1", "rate"},
		{"server.migration.speed=fast", "speed"},
		// Names, keys and label maps the operator or the chart turns into objects.
		{"operator.nodeSelector.bad\\ key=x", "bad key"},
		{"server.placement.nodeSelector.zone=not a label value", "nodeSelector"},
		{"operator.podAnnotations.bad\\ key=x", "bad key"},
		{"serviceAccount.annotations.bad\\ key=x", "bad key"},
		{"serviceAccount.name=Not_A_Name", "serviceAccount"},
		{"imagePullSecrets[0].name=Not_A_Name", "imagePullSecrets"},
		{"notifications.smtpUrlSecret.name=Not_A_Name", "smtpUrlSecret"},
		{"notifications.signedUrlSecret.key=not a key", "signedUrlSecret"},
		{"grafanaDashboard.namespace=Not_A_Namespace", "namespace"},
		{"fullnameOverride=9lives", "fullnameOverride"},
		{"nameOverride=Not_A_Name", "nameOverride"},
		{"operator.extraEnv[0].name=1 bad", "extraEnv"},
		// An image reference has no whitespace; the kubelet would refuse it only at pull.
		{"server.image.tag=1 0", "tag"},
		{"operator.image.repository=sluice dev/operator", "repository"},
		{"redisOperator.image= quay.io/opstree/redis-operator", "image"},
		// Each auth mode needs its settings; none is only what a user asks for by name.
		{"auth.mode=open", "mode"},
		{"auth.mode=", "mode"},
		{"auth.kubernetes.audience=", "audience"},
		{"auth.mode=keystone", "keystone"},
		{"auth.mode=tokens", "tokensSecret"},
		{"auth.keystone.url=keystone:5000", "url"},
		{"encryption.keySecret.name=Not_A_Name", "keySecret"},
	}
	for _, c := range cases {
		t.Run(c.set, func(t *testing.T) {
			_, err := helmTemplate(t, "--set", c.set)
			if err == nil {
				t.Fatalf("--set %s was accepted", c.set)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.want) {
				t.Fatalf("--set %s: error does not come from the schema or does not name %q:\n%s", c.set, c.want, msg)
			}
		})
	}
}
