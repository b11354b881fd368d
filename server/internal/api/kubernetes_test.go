package api

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/testutil"
)

// kubeServer serves --auth kubernetes against a stand-in issuer (the real
// apiserver's tokens are checked in auth's TestRealAPIServer), with an
// access file at accessFile and the static admin token "static-admin".
func kubeServer(t *testing.T, iss *testutil.Issuer, accessFile string, lean bool) *testServer {
	return startServer(t, func(o *config.Options) {
		o.Auth = config.AuthKubernetes
		o.Kubernetes.API = iss.URL
		o.Kubernetes.CAFile = iss.CAFile
		o.Kubernetes.TokenFile = iss.TokenFile
		o.AccessFile = accessFile
		o.AdminToken = "static-admin"
		o.LeanHTTP = lean
	})
}

// dialRaw is a raw client connection to ts, closed before ts stops.
func dialRaw(t *testing.T, ts *testServer) *rawConn {
	rc := &rawConn{addr: strings.TrimPrefix(ts.base, "http://")}
	t.Cleanup(func() {
		if rc.c != nil {
			rc.c.Close()
		}
	})
	return rc
}

// call sends one raw HTTP/1.1 request on rc: what the lean loop serves
// itself when it is on (and net/http otherwise).
func call(t *testing.T, rc *rawConn, method, path string, h hdr, body string) (int, map[string]any, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: sluice\r\nClient-ID: " + testClient + "\r\n")
	for k, v := range h {
		b.WriteString(k + ": " + v + "\r\n")
	}
	if body != "" {
		b.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n" + body)
	res := rc.do(t, method, b.String())
	raw, _ := io.ReadAll(res.Body)
	var doc map[string]any
	json.Unmarshal(raw, &doc)
	return res.StatusCode, doc, res.Header.Get("Retry-After")
}

func TestKubernetesAuth(t *testing.T) {
	iss := testutil.StartIssuer(t)
	now := time.Now()
	web := iss.Token("shop", "web", time.Hour)
	expired := iss.Sign("k1", iss.TokenClaims("shop", "web", []string{"sluice"}, now.Add(-2*time.Hour), time.Hour))
	apiAud := iss.Sign("k1", iss.TokenClaims("shop", "web", []string{"https://kubernetes.default.svc"}, now, time.Hour))
	otherIss := iss.TokenClaims("shop", "web", []string{"sluice"}, now, time.Hour)
	otherIss.Issuer = "https://elsewhere"
	wrongIss := iss.Sign("k1", otherIss)
	bearer := func(tok string, kv ...string) hdr { return withH(hdr{"Authorization": "Bearer " + tok}, kv...) }
	xauth := func(tok string, kv ...string) hdr { return withH(hdr{"X-Auth-Token": tok}, kv...) }
	post := `{"messages":[{"ttl":300,"body":{"n":1}}]}`
	cases := []struct {
		name, method, path string
		h                  hdr
		body               string
		status             int
		desc               string // fragment of the error's description
	}{
		{"no token", "POST", "/v2/queues/q/messages", hdr{"X-Project-ID": "shop"}, post, 401, "Send a token"},
		{"garbage token", "POST", "/v2/queues/q/messages", bearer("garbage"), post, 401, "The token is not valid."},
		{"expired", "POST", "/v2/queues/q/messages", bearer(expired), post, 401, "The token is not valid."},
		{"wrong audience", "POST", "/v2/queues/q/claims", bearer(apiAud), `{"ttl":60}`, 401, "The token is not valid."},
		{"wrong issuer", "POST", "/v2/queues/q/messages", xauth(wrongIss), post, 401, "The token is not valid."},
		{"post, project from the namespace", "POST", "/v2/queues/q/messages", bearer(web), post, 201, ""},
		{"post, X-Auth-Token", "POST", "/v2/queues/q/messages", xauth(web), post, 201, ""},
		{"post, matching X-Project-ID", "POST", "/v2/queues/q/messages", bearer(web, "X-Project-ID", "shop"), post, 201, ""},
		{"post, another project", "POST", "/v2/queues/q/messages", bearer(web, "X-Project-ID", "orders"), post, 403, "not valid for project orders"},
		{"claim", "POST", "/v2/queues/q/claims?limit=1", bearer(web), `{"ttl":60,"grace":60}`, 201, ""},
		{"claim, another project", "POST", "/v2/queues/q/claims", bearer(web, "X-Project-ID", "orders"), `{"ttl":60}`, 403, "not valid for project orders"},
		{"listing", "GET", "/v2/queues", bearer(web), "", 200, ""},
		{"admin route", "GET", "/v2/health", bearer(web), "", 403, "not authorized"},
		{"X-Roles does not make an admin", "GET", "/v2/health", bearer(web, "X-Roles", "admin"), "", 403, "not authorized"},
		{"static admin token", "GET", "/v2/health", xauth("static-admin", "X-Project-ID", "shop"), "", 200, ""},
		{"static admin token needs a project", "GET", "/v2/health", xauth("static-admin"), "", 400, "X-PROJECT-ID"},
	}
	for _, lean := range []bool{true, false} {
		t.Run("lean="+strconv.FormatBool(lean), func(t *testing.T) {
			ts := kubeServer(t, iss, "", lean)
			rc := dialRaw(t, ts)
			for _, tc := range cases {
				status, doc, _ := call(t, rc, tc.method, tc.path, tc.h, tc.body)
				desc, _ := doc["description"].(string)
				if status != tc.status || !strings.Contains(strings.ToLower(desc), strings.ToLower(tc.desc)) {
					t.Errorf("%s: %d %v, want %d with %q", tc.name, status, doc, tc.status, tc.desc)
				}
				if status == 401 || status == 403 {
					if title := doc["title"]; title != map[int]string{401: "Authentication required", 403: "Not authorized"}[status] {
						t.Errorf("%s: title %v", tc.name, title)
					}
				}
			}
			if lean {
				rec := httptest.NewRecorder()
				ts.m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				if !strings.Contains(rec.Body.String(), "\nsluice_http_handovers_total 0\n") {
					t.Error("the lean loop handed a request to net/http")
				}
			}
			// The token's messages are in project shop, as the admin sees it.
			_, doc, _ := call(t, rc, "GET", "/v2/queues/q/stats", xauth("static-admin", "X-Project-ID", "shop"), "")
			if total := doc["messages"].(map[string]any)["total"]; total != float64(3) {
				t.Errorf("project shop holds %v messages, want 3", total)
			}
			_, doc, _ = call(t, rc, "GET", "/v2/queues/q/stats", xauth("static-admin", "X-Project-ID", "orders"), "")
			if total := doc["messages"].(map[string]any)["total"]; total != float64(0) {
				t.Errorf("project orders holds %v messages, want 0", total)
			}
		})
	}
}

// TestKubernetesIssuerDown: with the issuer's keys unavailable at first
// use a token is neither accepted nor refused: 503 with Retry-After, and
// it works once the keys can be read.
func TestKubernetesIssuerDown(t *testing.T) {
	iss := testutil.StartIssuer(t)
	iss.SetDown(true)
	ts := kubeServer(t, iss, "", true)
	rc := dialRaw(t, ts)
	tok := hdr{"Authorization": "Bearer " + iss.Token("shop", "web", time.Hour)}
	status, doc, retry := call(t, rc, "POST", "/v2/queues/q/messages", tok, `{"messages":[{"body":1}]}`)
	if status != 503 || doc["title"] != titleUnavailable || retry == "" ||
		!strings.Contains(doc["description"].(string), "issuer") {
		t.Fatalf("issuer down: %d %v Retry-After %q", status, doc, retry)
	}
	iss.SetDown(false)
	waitFor(t, func() bool {
		status, _, _ := call(t, rc, "POST", "/v2/queues/q/messages", tok, `{"messages":[{"body":1}]}`)
		return status == 201
	})
}

// TestKubernetesGrants: an access grant lets one service account act in
// another project on one queue, on every route under that queue and no
// other; the file is re-read when it changes.
func TestKubernetesGrants(t *testing.T) {
	iss := testutil.StartIssuer(t)
	access := filepath.Join(t.TempDir(), "access.json")
	grant := `{"grants":[{"project":"orders","queue":"in","serviceAccounts":["shop/web"]}]}`
	testutil.WriteFileAtomic(t, access, []byte(grant))
	for _, lean := range []bool{true, false} {
		t.Run("lean="+strconv.FormatBool(lean), func(t *testing.T) {
			ts := kubeServer(t, iss, access, lean)
			rc := dialRaw(t, ts)
			web := func(kv ...string) hdr {
				return withH(hdr{"X-Auth-Token": iss.Token("shop", "web", time.Hour), "X-Project-ID": "orders"}, kv...)
			}
			api := hdr{"X-Auth-Token": iss.Token("shop", "api", time.Hour), "X-Project-ID": "orders"}
			other := hdr{"X-Auth-Token": iss.Token("billing", "web", time.Hour), "X-Project-ID": "orders"}
			cases := []struct {
				name, method, path string
				h                  hdr
				body               string
				status             int
			}{
				{"put the queue", "PUT", "/v2/queues/in", web(), `{}`, 201},
				{"get the queue", "GET", "/v2/queues/in", web(), "", 200},
				{"metadata", "PATCH", "/v2/queues/in", web("Content-Type", "application/openstack-messaging-v2.0-json-patch"),
					`[{"op":"add","path":"/metadata/k","value":1}]`, 200},
				{"post", "POST", "/v2/queues/in/messages", web(), `{"messages":[{"body":{"n":1}},{"body":{"n":2}}]}`, 201},
				{"stats", "GET", "/v2/queues/in/stats", web(), "", 200},
				{"list messages", "GET", "/v2/queues/in/messages?echo=true", web(), "", 200},
				{"claim", "POST", "/v2/queues/in/claims?limit=1", web(), `{"ttl":60,"grace":60}`, 201},
				{"subscribe", "POST", "/v2/queues/in/subscriptions", web(), `{"subscriber":"http://127.0.0.1:9/x","ttl":3600}`, 201},
				{"list subscriptions", "GET", "/v2/queues/in/subscriptions", web(), "", 200},
				{"no listing of the project", "GET", "/v2/queues", web(), "", 403},
				{"no other queue", "POST", "/v2/queues/out/messages", web(), `{"messages":[{"body":1}]}`, 403},
				{"no topic of that name", "POST", "/v2/topics/in/messages", web(), `{"messages":[{"body":1}]}`, 403},
				{"not another account of the namespace", "POST", "/v2/queues/in/messages", api, `{"messages":[{"body":1}]}`, 403},
				{"not the same name in another namespace", "GET", "/v2/queues/in", other, "", 403},
				{"delete the queue", "DELETE", "/v2/queues/in", web(), "", 204},
			}
			for _, tc := range cases {
				if status, doc, _ := call(t, rc, tc.method, tc.path, tc.h, tc.body); status != tc.status {
					t.Errorf("%s: %d %v, want %d", tc.name, status, doc, tc.status)
				}
			}
		})
	}

	// Reload: the grant removed, then added back, takes effect within the
	// file's recheck interval.
	ts := kubeServer(t, iss, access, true)
	rc := dialRaw(t, ts)
	h := hdr{"X-Auth-Token": iss.Token("shop", "web", time.Hour), "X-Project-ID": "orders"}
	postIn := func() int {
		status, _, _ := call(t, rc, "POST", "/v2/queues/in/messages", h, `{"messages":[{"body":1}]}`)
		return status
	}
	if s := postIn(); s != 201 {
		t.Fatalf("granted: %d", s)
	}
	testutil.WriteFileAtomic(t, access, []byte(`{"grants":[]}`))
	waitFor(t, func() bool { return postIn() == 403 })
	testutil.WriteFileAtomic(t, access, []byte(`{"grants":[{"project":"orders"`)) // malformed: still none
	testutil.WriteFileAtomic(t, access, []byte(grant))
	waitFor(t, func() bool { return postIn() == 201 })
	testutil.WriteFileAtomic(t, access, []byte(`{"grants":[{"project":"orders"`)) // malformed: the grant stays
	time.Sleep(2100 * time.Millisecond)
	if s := postIn(); s != 201 {
		t.Fatalf("a malformed file dropped the grant: %d", s)
	}
}

// BenchmarkAuthorizeKubernetes: what the kubernetes mode adds to a request
// once its token is cached (the steady state; bench-auth-kube measures
// the whole request), against no auth.
func BenchmarkAuthorizeKubernetes(b *testing.B) {
	iss := testutil.StartIssuer(b)
	kube := newTestServer(b, func(o *config.Options) {
		o.Auth, o.Kubernetes.API, o.Kubernetes.CAFile, o.Kubernetes.TokenFile = config.AuthKubernetes, iss.URL, iss.CAFile, iss.TokenFile
	})
	none := newTestServer(b, nil)
	for _, side := range []struct {
		name string
		s    *Server
		h    map[string]string
	}{
		{"none", none, map[string]string{"X-Project-Id": "shop"}},
		{"kubernetes", kube, map[string]string{"X-Project-Id": "shop", "Authorization": "Bearer " + iss.Token("shop", "web", time.Hour)}},
	} {
		b.Run(side.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/v2/queues/q/messages", nil)
			for k, v := range side.h {
				r.Header[k] = []string{v}
			}
			var c Call
			if e := side.s.authorize(r, &c); e != nil || c.Project != "shop" {
				b.Fatal(e, c.Project)
			}
			b.ReportAllocs()
			for b.Loop() {
				c = Call{}
				side.s.authorize(r, &c)
			}
		})
	}
}
