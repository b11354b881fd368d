package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
)

// keystoneStandIn answers the two Keystone calls sluice makes; the real
// Keystone drives the same paths in e2e/compat/test_keystone.py.
func keystoneStandIn(t *testing.T) *httptest.Server { return keystoneStandInB(t) }

func keystoneStandInB(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Subject-Token", "svc")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"service"}}}`))
	})
	mux.HandleFunc("GET /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Auth-Token") != "svc" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.Header.Get("X-Subject-Token") {
		case "tok-a", "tok-a2":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"proj-a"},"roles":[{"name":"member"}]}}`))
		case "tok-admin":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"ops"},"roles":[{"name":"admin"}]}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	ks := httptest.NewServer(mux)
	t.Cleanup(ks.Close)
	return ks
}

func TestKeystoneAuth(t *testing.T) {
	ks := keystoneStandIn(t)
	ts := startServer(t, func(o *config.Options) {
		o.Auth = config.AuthKeystone
		o.Keystone.URL = ks.URL + "/v3"
		o.Keystone.Username, o.Keystone.Password, o.Keystone.Project = "sluice", "pw", "service"
		o.Keystone.Revalidate = time.Hour
		o.AdminToken = "static-admin"
	})
	noProj := std("X-Project-ID", "<none>")
	cases := []struct {
		name   string
		h      hdr
		path   string
		status int
	}{
		{"no token", std(), "/v2/queues", 401},
		{"unknown token", withH(noProj, "X-Auth-Token", "nope"), "/v2/queues", 401},
		{"project from token", withH(noProj, "X-Auth-Token", "tok-a"), "/v2/queues", 200},
		{"matching X-Project-ID", std("X-Project-ID", "proj-a", "X-Auth-Token", "tok-a"), "/v2/queues", 200},
		{"another project", std("X-Project-ID", "proj-b", "X-Auth-Token", "tok-a"), "/v2/queues", 403},
		{"X-Roles ignored", withH(noProj, "X-Auth-Token", "tok-a", "X-Roles", "admin"), "/v2/health", 403},
		{"admin role", withH(noProj, "X-Auth-Token", "tok-admin"), "/v2/health", 200},
		{"static admin token", std("X-Auth-Token", "static-admin"), "/v2/health", 200},
		{"bearer form", withH(noProj, "Authorization", "Bearer tok-a"), "/v2/queues", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.t = t
			if r := ts.do("GET", tc.path, tc.h, ""); r.status != tc.status {
				t.Errorf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
		})
	}
	ts.t = t
	ts.must(201, "PUT", "/v2/queues/qa", withH(noProj, "X-Auth-Token", "tok-a"), "")
	if !strings.Contains(ts.must(200, "GET", "/v2/queues", std("X-Project-ID", "proj-a", "X-Auth-Token", "static-admin"), "").body, "qa") {
		t.Error("the queue was not created in the token's project")
	}

	// Keystone gone: the token already validated keeps working, a token
	// never seen gets 503 with Zaqar's body and Retry-After, never 200.
	ks.Close()
	ts.must(200, "GET", "/v2/queues", withH(noProj, "X-Auth-Token", "tok-a"), "")
	r := ts.must(503, "GET", "/v2/queues", withH(noProj, "X-Auth-Token", "tok-a2"), "")
	if m := r.json(t); m["title"] != titleUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("503 answer: %v %v", m, r.header)
	}
}

func TestKeystoneOptionsValidated(t *testing.T) {
	o := config.Defaults()
	o.Auth = config.AuthKeystone
	err := o.Validate()
	for _, want := range []string{"keystone-url", "keystone-username", "keystone-password"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("keystone mode without %s: %v", want, err)
		}
	}
}

// BenchmarkPostMessageAuth is the in-process cost of Keystone auth on the
// hot path (a cached token) next to no auth, in the same run:
//
//	go test -run '^$' -bench PostMessageAuth -count 6 ./internal/api/ | benchstat -
func BenchmarkPostMessageAuth(b *testing.B) {
	ks := keystoneStandInB(b)
	for _, mode := range []string{"none", "keystone"} {
		b.Run(mode, func(b *testing.B) {
			s := newTestServer(b, func(o *config.Options) {
				if mode == "keystone" {
					o.Auth = config.AuthKeystone
					o.Keystone.URL = ks.URL
					o.Keystone.Username, o.Keystone.Password, o.Keystone.Project = "sluice", "pw", "service"
				}
			})
			body := benchBody()
			req := httptest.NewRequest("POST", "/v2/queues/bench/messages", nil)
			req.Header.Set("Client-ID", testClient)
			req.Header.Set("X-Project-ID", "proj-a")
			req.Header.Set("X-Auth-Token", "tok-a")
			req.Header.Set("Content-Type", "application/json")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := req.Clone(req.Context())
				r.Body = nopCloser{bytes.NewReader(body)}
				r.ContentLength = int64(len(body))
				clear(w.h)
				s.ServeHTTP(w, r)
				if w.status != 201 {
					b.Fatalf("status %d", w.status)
				}
				if i%1000 == 999 {
					s.drv.Queues().Purge(req.Context(), refOf("proj-a", "bench"))
				}
			}
		})
	}
}
