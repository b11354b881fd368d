package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/server/internal/testutil"
)

func TestKubernetesMode(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	testutil.NewCA(t).WriteCert(t, ca)
	notPEM := filepath.Join(dir, "token")
	os.WriteFile(notPEM, []byte("eyJhbGciOi..."), 0o600)
	kube := []string{"--auth", "kubernetes", "--kubernetes-ca-file", ca}
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		api  string // the effective apiserver URL when valid
		want string // substring of the validation error; "" = valid
	}{
		{"in a pod", kube, inPod, "https://10.96.0.1:443", ""},
		{"in a pod, IPv6", kube, map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}, "https://[fd00::1]:6443", ""},
		{"explicit API", append(kube, "--kubernetes-api", "https://127.0.0.1:6443/"), nil, "https://127.0.0.1:6443", ""},
		{"from the environment", []string{"--auth", "kubernetes"}, map[string]string{"SLUICE_KUBERNETES_CA_FILE": ca,
			"SLUICE_KUBERNETES_API": "https://api:6443", "SLUICE_KUBERNETES_AUDIENCE": "queues"}, "https://api:6443", ""},
		{"with an access file", append(kube, "--access-file", filepath.Join(dir, "absent.json")), inPod, "https://10.96.0.1:443", ""},
		{"outside a pod without an API", kube, nil, "", "kubernetes-api: required"},
		{"http API", append(kube, "--kubernetes-api", "http://127.0.0.1:6443"), nil, "", "not an https URL"},
		{"with static tokens", append(kube, "--auth-tokens", "t=p"), inPod, "", "cannot be used with auth-tokens"},
		{"CA file missing", []string{"--auth", "kubernetes", "--kubernetes-ca-file", filepath.Join(dir, "none")}, inPod, "", "kubernetes-ca-file"},
		{"CA file not PEM", []string{"--auth", "kubernetes", "--kubernetes-ca-file", notPEM}, inPod, "", "no PEM certificate"},
		{"empty audience", append(kube, "--kubernetes-audience", " "), inPod, "", "kubernetes-audience"},
		{"access file in keystone mode", []string{"--auth", "none", "--access-file", "/x"}, nil, "", "access-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// KubernetesAPI reads the pod's environment itself.
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.env["KUBERNETES_SERVICE_HOST"])
			t.Setenv("KUBERNETES_SERVICE_PORT", tc.env["KUBERNETES_SERVICE_PORT"])
			l, err := Load(tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			o := l.Options
			err = o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("validate: %v, want %q", err, tc.want)
			}
			if tc.want == "" && o.KubernetesAPI() != tc.api {
				t.Errorf("API %q, want %q", o.KubernetesAPI(), tc.api)
			}
		})
	}
}
