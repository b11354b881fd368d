package api

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
)

func TestStaticTokens(t *testing.T) {
	ts := startServer(t, func(o *config.Options) {
		o.Tokens = map[string]string{"tok-a": "proj-a", "tok-b": "proj-b"}
		o.AdminToken = "tok-admin"
	})
	noProj := std("X-Project-ID", "<none>")
	cases := []struct {
		name   string
		h      hdr
		path   string
		status int
	}{
		{"no token", std(), "/v2/queues", 401},
		{"unknown token", std("Authorization", "Bearer nope"), "/v2/queues", 401},
		{"bearer token, project from token", withH(noProj, "Authorization", "Bearer tok-a"), "/v2/queues", 200},
		{"x-auth-token", withH(noProj, "X-Auth-Token", "tok-b"), "/v2/queues", 200},
		{"token for another project", std("X-Project-ID", "proj-b", "Authorization", "Bearer tok-a"), "/v2/queues", 403},
		{"roles header ignored with tokens", withH(noProj, "Authorization", "Bearer tok-a", "X-Roles", "admin"), "/v2/health", 403},
		{"admin token", std("Authorization", "Bearer tok-admin"), "/v2/health", 200},
		{"admin token needs a project", withH(noProj, "Authorization", "Bearer tok-admin"), "/v2/queues", 400},
		{"versions need nothing", hdr{}, "/", 300},
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
	// Token a's queue lives in proj-a: token b cannot see it.
	ts.must(201, "PUT", "/v2/queues/qa", withH(noProj, "Authorization", "Bearer tok-a"), "")
	if strings.Contains(ts.must(200, "GET", "/v2/queues", withH(noProj, "Authorization", "Bearer tok-b"), "").body, "qa") {
		t.Error("proj-b sees proj-a's queue")
	}
	if !strings.Contains(ts.must(200, "GET", "/v2/queues", std("X-Project-ID", "proj-a", "Authorization", "Bearer tok-admin"), "").body, "qa") {
		t.Error("admin token cannot act for proj-a")
	}
}

func withH(base hdr, kv ...string) hdr {
	out := hdr{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestAdminRolesHeaderConfigurable(t *testing.T) {
	ts := startServer(t, func(o *config.Options) { o.TrustRolesHeader = false })
	ts.must(403, "GET", "/v2/health", std("X-Roles", "admin"), "")
	ts2 := startServer(t, nil)
	ts2.must(200, "GET", "/v2/health", std("X-Roles", "reader, admin"), "")
}

func TestPingHealthAndDrain(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(204, "GET", "/v2/ping", std(), "")
	ts.must(204, "HEAD", "/v2/ping", std(), "")
	ts.must(200, "GET", "/readyz", hdr{}, "")
	h := ts.must(200, "GET", "/v2/health", std("X-Roles", "admin"), "").json(t)
	ops := h["operation_status"].(map[string]any)
	if h["storage_reachable"] != true || len(ops) != 8 {
		t.Fatalf("health %v", h)
	}
	for name, op := range ops {
		if op.(map[string]any)["succeeded"] != true {
			t.Errorf("%s failed: %v", name, op)
		}
	}
	// The scratch queue is gone afterwards.
	if strings.Contains(ts.must(200, "GET", "/v2/queues", std(), "").body, "sluice-health") {
		t.Error("health check left its queue behind")
	}
	ts.SetDraining(true)
	r := ts.must(503, "GET", "/v2/ping", std(), "")
	if r.body != "" || r.header.Get("Retry-After") == "" {
		t.Errorf("draining ping: %q %v", r.body, r.header)
	}
	ts.must(503, "GET", "/readyz", hdr{}, "")
	ts.must(503, "GET", "/v2/health", std("X-Roles", "admin"), "")
	ts.must(200, "GET", "/healthz", hdr{}, "")
	// Draining does not refuse ordinary requests: they still complete.
	ts.must(200, "GET", "/v2/queues", std(), "")
	ts.SetDraining(false)
	ts.must(204, "GET", "/v2/ping", std(), "")
}

func TestMetricsUseRouteTemplates(t *testing.T) {
	ts := startServer(t, nil)
	ts.Server.opts.Metrics = true
	// newTestServer has no metrics route; mount the handler as Run does.
	mh := ts.m.Handler()
	ts.Handle("GET", "/metrics", Public, func(w http.ResponseWriter, r *http.Request, _ *Call) { mh.ServeHTTP(w, r) })
	for _, q := range []string{"a1", "a2", "a3"} {
		ts.must(201, "POST", "/v2/queues/"+q+"/messages", std(), `{"messages":[{"body":1}]}`)
	}
	ts.must(404, "GET", "/v2/nothing-"+"x", std(), "")
	body := ts.must(200, "GET", "/metrics", hdr{}, "").body
	for _, want := range []string{
		`sluice_http_requests_total{code="201",method="POST",route="/v2/queues/{queue_name}/messages"} 3`,
		`sluice_http_requests_total{code="404",method="other",route="unmatched"} 1`,
		`sluice_http_request_duration_seconds_count{method="POST",route="/v2/queues/{queue_name}/messages"} 3`,
		`sluice_claims_expired_total 0`,
		`sluice_dead_letter_moves_total 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, q := range []string{"a1", "a2", "a3", "nothing-x"} {
		if strings.Contains(body, q) {
			t.Errorf("metrics mention %q: labels must not carry URLs", q)
		}
	}
}

// downDriver answers every call as an unreachable backend.
type downDriver struct{}

var errDown = storage.E("test", storage.Unavailable, "connection refused")

func (downDriver) Queues() storage.QueueStore     { return downQueues{} }
func (downDriver) Messages() storage.MessageStore { return downMessages{} }
func (downDriver) Claims() storage.ClaimStore     { return downClaims{} }
func (downDriver) Ping(context.Context) error     { return errDown }
func (downDriver) Close() error                   { return nil }

type downQueues struct{}

func (downQueues) Create(context.Context, storage.QueueRef, storage.Metadata) (bool, error) {
	return false, errDown
}
func (downQueues) Exists(context.Context, storage.QueueRef) (bool, error) { return false, errDown }
func (downQueues) GetMetadata(context.Context, storage.QueueRef) (storage.Metadata, error) {
	return nil, errDown
}
func (downQueues) SetMetadata(context.Context, storage.QueueRef, storage.Metadata) error {
	return errDown
}
func (downQueues) UpdateMetadata(context.Context, storage.QueueRef, storage.MetadataUpdate) (storage.Metadata, error) {
	return nil, errDown
}
func (downQueues) Delete(context.Context, storage.QueueRef) error { return errDown }
func (downQueues) List(context.Context, string, storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	return nil, errDown
}
func (downQueues) Stats(context.Context, storage.QueueRef) (storage.QueueStats, error) {
	return storage.QueueStats{}, errDown
}
func (downQueues) Purge(context.Context, storage.QueueRef) error { return errDown }

type downMessages struct{}

func (downMessages) Post(context.Context, storage.QueueRef, string, []storage.NewMessage) ([]string, error) {
	return nil, errDown
}
func (downMessages) List(context.Context, storage.QueueRef, storage.ListMessagesOptions) ([]storage.Message, string, error) {
	return nil, "", errDown
}
func (downMessages) Get(context.Context, storage.QueueRef, string) (storage.Message, error) {
	return storage.Message{}, errDown
}
func (downMessages) GetMany(context.Context, storage.QueueRef, []string) ([]storage.Message, error) {
	return nil, errDown
}
func (downMessages) Delete(context.Context, storage.QueueRef, string, string) error { return errDown }
func (downMessages) DeleteMany(context.Context, storage.QueueRef, []string, string) error {
	return errDown
}
func (downMessages) Pop(context.Context, storage.QueueRef, int) ([]storage.Message, error) {
	return nil, errDown
}

type downClaims struct{}

func (downClaims) Create(context.Context, storage.QueueRef, storage.ClaimOptions) (storage.Claim, error) {
	return storage.Claim{}, errDown
}
func (downClaims) Get(context.Context, storage.QueueRef, string) (storage.Claim, error) {
	return storage.Claim{}, errDown
}
func (downClaims) Update(context.Context, storage.QueueRef, string, time.Duration, time.Duration) error {
	return errDown
}
func (downClaims) Delete(context.Context, storage.QueueRef, string) error { return errDown }

func TestStorageUnavailable(t *testing.T) {
	opts := config.Defaults()
	opts.AccessLog = false
	ts := serve(t, New(opts, downDriver{}, nil, nil))
	cases := []struct{ method, path, body, desc string }{
		{"PUT", "/v2/queues/demo", "", "Queue could not be created."},
		{"POST", "/v2/queues/demo/messages", `{"messages":[{"body":1}]}`, "Messages could not be enqueued."},
		{"GET", "/v2/queues/demo/messages", "", "Messages could not be listed."},
		{"POST", "/v2/queues/demo/claims", `{"ttl":60,"grace":60}`, "Claim could not be created."},
		{"GET", "/v2/queues", "", "Queues could not be listed."},
		{"GET", "/v2/queues/demo/stats", "", "Queue stats could not be read."},
		{"DELETE", "/v2/queues/demo/messages/x", "", "Message could not be deleted."},
	}
	for _, tc := range cases {
		start := time.Now()
		r := ts.must(503, tc.method, tc.path, std(), tc.body)
		m := r.json(t)
		if m["title"] != "Service temporarily unavailable" || m["description"] != tc.desc+" Please try again in a few seconds." {
			t.Errorf("%s %s: %v", tc.method, tc.path, m)
		}
		if r.header.Get("Retry-After") != "2" {
			t.Errorf("%s %s: Retry-After %q", tc.method, tc.path, r.header.Get("Retry-After"))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s %s took %v", tc.method, tc.path, d)
		}
	}
	if r := ts.must(503, "GET", "/v2/ping", std(), ""); r.body != "" {
		t.Errorf("ping body %q", r.body)
	}
	h := ts.must(503, "GET", "/v2/health", std("X-Roles", "admin"), "").json(t)
	if h["storage_reachable"] != false {
		t.Errorf("health %v", h)
	}
}

// TestGracefulShutdown: a request in flight when shutdown starts completes,
// and the extension hook mounts routes with the header checks applied.
func TestGracefulShutdown(t *testing.T) {
	s := newTestServer(t, func(o *config.Options) { o.DrainDelay = time.Second })
	started := make(chan struct{})
	s.Handle("GET", "/v2/slow", Admin, func(w http.ResponseWriter, r *http.Request, c *Call) {
		close(started)
		// Outlasts the drain delay: shutdown must wait for it.
		time.Sleep(1500 * time.Millisecond)
		WriteJSON(w, 200, map[string]string{"project": c.Project})
	})
	addr, cancel, done := listenAndServe(t, s)
	base := "http://" + addr
	ts := &testServer{Server: s, base: base, t: t}
	ts.must(403, "GET", "/v2/slow", std(), "")

	got := make(chan resp, 1)
	go func() {
		req, _ := http.NewRequest("GET", base+"/v2/slow", nil)
		req.Header.Set("Client-ID", testClient)
		req.Header.Set("X-Project-ID", "p9")
		req.Header.Set("X-Roles", "admin")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- resp{status: -1, body: err.Error()}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- resp{status: res.StatusCode, body: string(b)}
	}()
	<-started
	cancel()
	// During the drain delay the listener still answers, with ping 503.
	time.Sleep(100 * time.Millisecond)
	ts.must(503, "GET", "/v2/ping", std(), "")
	r := <-got
	if r.status != 200 || r.body != `{"project":"p9"}` {
		t.Errorf("in-flight request: %d %s", r.status, r.body)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Error("listener still open after shutdown")
	}
}

func TestVersionsAndHome(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.must(300, "GET", "/", hdr{}, "")
	if r.body != versionsDoc || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("versions: %s %v", r.body, r.header)
	}
	if r := ts.must(300, "HEAD", "/", hdr{}, ""); r.body != "" {
		t.Errorf("HEAD / body %q", r.body)
	}
	ts.must(400, "GET", "/v2/", hdr{}, "")
	r = ts.must(200, "GET", "/v2/", std(), "")
	if r.header.Get("Content-Type") != "application/json-home" || r.header.Get("Cache-Control") != "max-age=86400" {
		t.Errorf("home headers %v", r.header)
	}
	res := r.json(t)["resources"].(map[string]any)
	for _, rel := range []string{"rel/queues", "rel/post_messages", "rel/post_claim", "rel/ping", "rel/health", "rel/pools",
		"rel/subscriptions_get", "rel/subscriptions_post", "rel/subscription", "rel/subscription_patch",
		"rel/subscription_confirm", "rel/queue_deliveries"} {
		if _, ok := res[rel]; !ok {
			t.Errorf("home lacks %s", rel)
		}
	}
	// Every advertised resource is served: each allowed method reaches a
	// handler (no falcon-style "404 Not Found" for an unmatched path, no
	// 405). Pools and flavors exist only with pooling on.
	vars := regexp.MustCompile(`\{[a-z_]+\}`)
	for rel, v := range res {
		doc := v.(map[string]any)
		tmpl, _ := doc["href-template"].(string)
		if tmpl == "" {
			tmpl, _ = doc["href"].(string)
		}
		path := vars.ReplaceAllString(strings.Split(tmpl, "{?")[0], "home1")
		if strings.HasPrefix(path, "/v2/pools") || strings.HasPrefix(path, "/v2/flavors") {
			continue // served only with pooling on (run_pooled_test.go)
		}
		for _, m := range doc["hints"].(map[string]any)["allow"].([]any) {
			r := ts.do(m.(string), path, withH(std(), "X-Roles", "admin"), "{}")
			if r.status == 405 || (r.status == 404 && strings.Contains(r.body, "404 Not Found")) {
				t.Errorf("home advertises %s %s (%s), which sluice does not serve: %d %s", m, path, rel, r.status, r.body)
			}
		}
	}
	if _, ok := res["rel/share"]; ok {
		t.Errorf("home advertises rel/share")
	}
}
