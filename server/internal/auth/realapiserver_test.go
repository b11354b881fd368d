package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"sluice.dev/server/internal/testutil"
)

// realCluster is a namespace of its own on the apiserver SLUICE_KUBECONFIG
// names (make server-kube-suite: the local control plane), with the
// service accounts the tests need; it is deleted at cleanup.
type realCluster struct {
	kubectl, kubeconfig string
	api, caFile         string
	ns                  string
	admin               *http.Client // the kubeconfig's own credentials
	serverTokenFile     string       // service account "server"'s token
}

// needCluster returns the cluster, or ends the test: it fails under CI
// (make test runs it on the control plane) and skips elsewhere.
func needCluster(tb testing.TB) *realCluster {
	tb.Helper()
	kc := os.Getenv("SLUICE_KUBECONFIG")
	if kc == "" {
		if testutil.InCI() {
			tb.Fatal("SLUICE_KUBECONFIG is unset: the real-apiserver test needs a cluster (make server-kube-suite)")
		}
		tb.Skip("SLUICE_KUBECONFIG is unset: no real apiserver to test against (make server-kube-suite runs it; it fails under CI=true)")
	}
	kubectl := os.Getenv("SLUICE_KUBECTL")
	if kubectl == "" {
		kubectl = testutil.RequireBinary(tb, "kubectl", "kubectl (or set SLUICE_KUBECTL)")
	}
	rc := &realCluster{kubectl: kubectl, kubeconfig: kc}
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CAData string `json:"certificate-authority-data"`
				CA     string `json:"certificate-authority"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				CertData string `json:"client-certificate-data"`
				KeyData  string `json:"client-key-data"`
				Token    string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal([]byte(rc.run(tb, "config", "view", "--raw", "--minify", "-o", "json")), &cfg); err != nil ||
		len(cfg.Clusters) != 1 || len(cfg.Users) != 1 {
		tb.Fatalf("kubeconfig %s: %v", kc, err)
	}
	cl, user := cfg.Clusters[0].Cluster, cfg.Users[0].User
	rc.api = cl.Server
	dir := tb.TempDir()
	rc.caFile = filepath.Join(dir, "ca.crt")
	ca := []byte(nil)
	if cl.CAData != "" {
		ca, _ = base64.StdEncoding.DecodeString(cl.CAData)
	} else {
		ca, _ = os.ReadFile(cl.CA)
	}
	testutil.WriteFileAtomic(tb, rc.caFile, ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tlsCfg := &tls.Config{RootCAs: pool}
	if user.CertData != "" {
		c, _ := base64.StdEncoding.DecodeString(user.CertData)
		k, _ := base64.StdEncoding.DecodeString(user.KeyData)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			tb.Fatal(err)
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	rc.admin = &http.Client{Timeout: 30 * time.Second, Transport: &bearerTransport{token: user.Token,
		rt: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 4}}}

	var b [4]byte
	rand.Read(b[:])
	rc.ns = "authtest-" + hex.EncodeToString(b[:])
	rc.run(tb, "create", "namespace", rc.ns)
	tb.Cleanup(func() { rc.run(tb, "delete", "namespace", rc.ns, "--wait=false") })
	for _, sa := range []string{"server", "client", "gone"} {
		rc.run(tb, "-n", rc.ns, "create", "serviceaccount", sa)
	}
	// The server's own credential: a token for the apiserver's default
	// audience, as the kubelet projects it into the server's pod.
	rc.serverTokenFile = filepath.Join(dir, "token")
	testutil.WriteFileAtomic(tb, rc.serverTokenFile, []byte(rc.createToken(tb, "server", "", "10m")))
	return rc
}

type bearerTransport struct {
	token string
	rt    http.RoundTripper
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.rt.RoundTrip(r)
}

func (rc *realCluster) run(tb testing.TB, args ...string) string {
	tb.Helper()
	cmd := exec.Command(rc.kubectl, append([]string{"--kubeconfig", rc.kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// createToken is `kubectl create token` (audience "" = the apiserver's).
func (rc *realCluster) createToken(tb testing.TB, sa, audience, duration string) string {
	args := []string{"-n", rc.ns, "create", "token", sa, "--duration", duration}
	if audience != "" {
		args = append(args, "--audience", audience)
	}
	return rc.run(tb, args...)
}

// tokenRequest asks the TokenRequest API directly: many tokens quickly.
func (rc *realCluster) tokenRequest(tb testing.TB, sa, audience string) string {
	body := fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":[%q],"expirationSeconds":600}}`, audience)
	var out struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	rc.post(tb, "/api/v1/namespaces/"+rc.ns+"/serviceaccounts/"+sa+"/token", body, &out)
	return out.Status.Token
}

func (rc *realCluster) post(tb testing.TB, path, body string, dst any) {
	tb.Helper()
	res, err := rc.admin.Post(rc.api+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 || json.Unmarshal(b, dst) != nil {
		tb.Fatalf("POST %s: %d %s", path, res.StatusCode, b)
	}
}

func (rc *realCluster) validator(tb testing.TB, tokenFile string) *ServiceAccounts {
	tb.Helper()
	v, err := NewServiceAccounts(KubernetesConfig{API: rc.api, TokenFile: tokenFile, CAFile: rc.caFile,
		Audience: "sluice", Timeout: 10 * time.Second}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// tokenReview is the other way to validate a token: ask the apiserver
// (TokenReview with spec.audiences) every time. It exists to compare the
// two (BenchmarkRealAPIServerFirstSight) and to show what only it sees;
// the server validates offline.
type tokenReview struct {
	rc       *realCluster
	audience string
}

func (v tokenReview) Validate(ctx context.Context, token string) (Identity, error) {
	body, _ := json.Marshal(map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": token, "audiences": []string{v.audience}}})
	req, _ := http.NewRequestWithContext(ctx, "POST", v.rc.api+"/apis/authentication.k8s.io/v1/tokenreviews", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := v.rc.admin.Do(req)
	if err != nil {
		return Identity{}, &UnavailableError{err}
	}
	defer res.Body.Close()
	var out struct {
		Status struct {
			Authenticated bool   `json:"authenticated"`
			Error         string `json:"error"`
			User          struct {
				Username string `json:"username"`
			} `json:"user"`
		} `json:"status"`
	}
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusCreated || json.Unmarshal(b, &out) != nil {
		return Identity{}, &UnavailableError{fmt.Errorf("TokenReview: %d %s", res.StatusCode, b)}
	}
	if !out.Status.Authenticated {
		return Identity{}, invalid("TokenReview: %s", out.Status.Error)
	}
	ns, name, err := serviceAccountOf(out.Status.User.Username, kubeClaims{})
	if err != nil {
		return Identity{}, err
	}
	// TokenReview does not say when the token expires; its exp does.
	var std jwt.Claims
	if tok, err := jwt.ParseSigned(token, signingAlgs); err == nil {
		tok.UnsafeClaimsWithoutVerification(&std)
	}
	id := Identity{Project: ns, ServiceAccount: ns + "/" + name}
	if std.Expiry != nil {
		id.Expires = std.Expiry.Time()
	}
	return id, nil
}

// TestRealAPIServer: tokens made by the real kube-apiserver, validated by
// the server's offline path against that apiserver's own discovery
// document and keys, read with a service account's token (what the
// default system:service-account-issuer-discovery binding allows).
func TestRealAPIServer(t *testing.T) {
	rc := needCluster(t)
	t.Logf("apiserver %s, namespace %s; discovery readable by %s", rc.api, rc.ns,
		rc.run(t, "get", "clusterrolebinding", "system:service-account-issuer-discovery", "-o", "jsonpath={.subjects}"))
	v := rc.validator(t, rc.serverTokenFile)
	ctx := context.Background()

	good := rc.createToken(t, "client", "sluice", "10m")
	id, err := v.Validate(ctx, good)
	if err != nil {
		t.Fatalf("kubectl create token client --audience sluice: %v", err)
	}
	if id.Project != rc.ns || id.ServiceAccount != rc.ns+"/client" || id.Admin {
		t.Errorf("identity %+v", id)
	}
	if d := time.Until(id.Expires); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("expires in %v, want about 10m", d)
	}
	for _, tc := range []struct{ name, token string }{
		{"another audience", rc.createToken(t, "client", "vault", "10m")},
		{"the apiserver's audience", rc.createToken(t, "client", "", "10m")},
		{"another audience too", rc.createToken(t, "client", "sluice-other", "10m")},
	} {
		if _, err := v.Validate(ctx, tc.token); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "audiences") {
			t.Errorf("%s: %v, want refused for its audience", tc.name, err)
		}
	}
	// The same tokens through TokenReview agree.
	tr := tokenReview{rc, "sluice"}
	if id2, err := tr.Validate(ctx, good); err != nil || id2.ServiceAccount != id.ServiceAccount {
		t.Errorf("TokenReview of the good token: %+v %v", id2, err)
	}
	if _, err := tr.Validate(ctx, rc.createToken(t, "client", "vault", "10m")); !errors.Is(err, ErrInvalid) {
		t.Errorf("TokenReview of another audience: %v", err)
	}

	// Discovery needs a credential: anonymous requests are refused.
	var down *UnavailableError
	if _, err := rc.validator(t, "").Validate(ctx, good); !errors.As(err, &down) {
		t.Errorf("anonymous key fetch: %v, want unavailable", err)
	} else {
		t.Logf("anonymous key fetch: %v", err)
	}

	// A deleted service account: TokenReview refuses its token at once,
	// the offline check keeps accepting it until it expires.
	gone := rc.createToken(t, "gone", "sluice", "10m")
	rc.run(t, "-n", rc.ns, "delete", "serviceaccount", "gone")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := tr.Validate(ctx, gone)
		if errors.Is(err, ErrInvalid) {
			t.Logf("TokenReview after the deletion: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TokenReview still accepts a deleted service account's token: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := v.Validate(ctx, gone); err != nil {
		t.Errorf("offline check of a deleted service account's token: %v (expected: accepted until exp)", err)
	}
}

// BenchmarkRealAPIServerFirstSight: what validating a token never seen
// before costs, offline (signature against the keys in memory) and by
// TokenReview (a round trip to the apiserver). Every iteration has a token
// of its own, issued before the timer starts, so neither side's caches
// (the apiserver caches authentications for seconds) answer.
func BenchmarkRealAPIServerFirstSight(b *testing.B) {
	rc := needCluster(b)
	ctx := context.Background()
	sides := []struct {
		name string
		v    Validator
	}{
		{"jwks", rc.validator(b, rc.serverTokenFile)},
		{"tokenreview", tokenReview{rc, "sluice"}},
	}
	warm := rc.tokenRequest(b, "client", "sluice")
	for _, side := range sides {
		if _, err := side.v.Validate(ctx, warm); err != nil { // keys fetched, connections open
			b.Fatal(err)
		}
		b.Run(side.name, func(b *testing.B) {
			toks := make([]string, b.N)
			for i := range toks {
				toks[i] = rc.tokenRequest(b, "client", "sluice")
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := side.v.Validate(ctx, toks[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
