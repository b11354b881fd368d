package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/auth"
	"sluice.dev/server/internal/storage"
)

// fakeTrusts records trusts as Keystone would keep them; tokens named
// "refused" get Keystone's 403.
type fakeTrusts struct {
	mu      sync.Mutex
	n       int
	live    map[string]time.Time // trust id -> expiry
	deleted []string
}

func (f *fakeTrusts) Create(_ context.Context, tok string, expires time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tok == "refused" {
		return "", &auth.RefusedError{Status: 403, Message: "You are not authorized to perform the requested action: identity:create_trust."}
	}
	f.n++
	id := fmt.Sprintf("trust-%d", f.n)
	f.live[id] = expires
	return id, nil
}

func (f *fakeTrusts) Delete(_ context.Context, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeTrusts) Token(context.Context, string) (string, string, error) { return "", "", nil }
func (f *fakeTrusts) Refused(string, string)                                {}

func (f *fakeTrusts) liveIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.live {
		ids = append(ids, id)
	}
	return ids
}

func (f *fakeTrusts) expiry(id string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[id]
}

func startTrustServer(t *testing.T) (*testServer, *fakeTrusts) {
	s := newTestServer(t, nil)
	f := &fakeTrusts{live: map[string]time.Time{}}
	s.trusts = f
	return serve(t, s), f
}

func (ts *testServer) stored(t *testing.T, queue, id string) storage.Subscription {
	t.Helper()
	sub, err := ts.drv.Subscriptions().Get(t.Context(), storageRef("p1", queue), id)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestTrustSubscriptionLifecycle: a trust+ subscription gets a trust
// expiring with it (shown as options.trust_id, as Zaqar shows it), a new
// one from whoever updates it, none when it stops being trust+,
// and its trust is deleted with it, with its queue and by a purge.
func TestTrustSubscriptionLifecycle(t *testing.T) {
	ts, f := startTrustServer(t)
	h := std("Content-Type", "application/json", "X-Auth-Token", "alice")
	before := time.Now()
	id := ts.must(201, "POST", "/v2/queues/sq/subscriptions", h,
		`{"subscriber":"trust+http://127.0.0.1:9/v2/queues/copy/messages","ttl":1200,"options":{"post_data":"{\"messages\":[{\"body\":\"$zaqar_message$\"}]}","post_headers":{"X-Project-ID":"p1"}}}`).json(t)["subscription_id"].(string)
	got := ts.must(200, "GET", "/v2/queues/sq/subscriptions/"+id, h, "").json(t)["options"].(map[string]any)
	if got["trust_id"] != "trust-1" || got["post_headers"].(map[string]any)["X-Project-ID"] != "p1" {
		t.Fatalf("options %v", got)
	}
	if exp := f.expiry("trust-1"); exp.Before(before.Add(1200*time.Second)) || exp.After(time.Now().Add(1200*time.Second+trustSlack)) {
		t.Errorf("trust expires %v, want the subscription's expiry plus %v", exp, trustSlack)
	}

	// The same subscriber again: its subscription keeps its trust, the
	// one made for the repeat is deleted.
	ts.must(201, "POST", "/v2/queues/sq/subscriptions", h, `{"subscriber":"trust+http://127.0.0.1:9/v2/queues/copy/messages"}`)
	if live := f.liveIDs(); len(live) != 1 || live[0] != "trust-1" {
		t.Errorf("trusts after a repeated subscriber %v", live)
	}

	// Every PATCH re-delegates from the caller: options, ttl, subscriber.
	// The trust id may be sent back unchanged; the old trust is deleted.
	current := func() string { return ts.stored(t, "sq", id).Options["trust_id"].(string) }
	for i, patch := range []string{
		`{"options":{"note":"b"}}`,
		`{"options":{"note":"c","trust_id":"trust-3"}}`,
		`{"ttl":7200}`,
		`{"subscriber":"trust+https://127.0.0.1:9/elsewhere"}`,
	} {
		ts.must(204, "PATCH", "/v2/queues/sq/subscriptions/"+id, h, patch)
		sub := ts.stored(t, "sq", id)
		want := fmt.Sprintf("trust-%d", i+3)
		if sub.Options["trust_id"] != want || i > 0 && sub.Options["note"] != "c" {
			t.Errorf("after %s: options %v, want trust %s", patch, sub.Options, want)
		}
		if live := f.liveIDs(); len(live) != 1 || live[0] != want {
			t.Errorf("after %s: live trusts %v", patch, live)
		}
		// The trust lives as long as the subscription (plus the slack).
		if exp := f.expiry(want); exp.Sub(sub.Expires) < trustSlack-time.Second || exp.Sub(sub.Expires) > trustSlack+time.Second {
			t.Errorf("after %s: trust expires %v, subscription %v", patch, exp, sub.Expires)
		}
	}
	if current() != "trust-6" {
		t.Fatalf("trust %s", current())
	}
	// Plain https: no trust.
	ts.must(204, "PATCH", "/v2/queues/sq/subscriptions/"+id, h, `{"subscriber":"https://127.0.0.1:9/plain"}`)
	if sub := ts.stored(t, "sq", id); sub.Options["trust_id"] != nil {
		t.Errorf("a plain subscriber kept %v", sub.Options)
	}
	if live := f.liveIDs(); len(live) != 0 {
		t.Errorf("live trusts %v", live)
	}
	// Back to trust+, then deleted: its trust goes with it.
	ts.must(204, "PATCH", "/v2/queues/sq/subscriptions/"+id, h, `{"subscriber":"trust+https://127.0.0.1:9/again"}`)
	ts.must(204, "DELETE", "/v2/queues/sq/subscriptions/"+id, h, "")
	if live := f.liveIDs(); len(live) != 0 {
		t.Errorf("live trusts after delete %v", live)
	}

	for i, path := range []string{"/v2/queues/pq/purge", "/v2/queues/dq"} {
		q := []string{"pq", "dq"}[i]
		for j := range 3 {
			ts.must(201, "POST", "/v2/queues/"+q+"/subscriptions", h, fmt.Sprintf(`{"subscriber":"trust+http://127.0.0.1:9/%d"}`, j))
		}
		ts.must(201, "POST", "/v2/queues/"+q+"/subscriptions", h, `{"subscriber":"http://127.0.0.1:9/plain"}`)
		if path == "/v2/queues/dq" {
			ts.must(204, "DELETE", path, h, "")
		} else {
			ts.must(204, "POST", path, h, `{"resource_types":["subscriptions"]}`)
		}
		if live := f.liveIDs(); len(live) != 0 {
			t.Errorf("%s left trusts %v", path, live)
		}
	}
}

// TestTrustSubscriptionRefusals: what is refused, and that a refusal
// stores nothing.
func TestTrustSubscriptionRefusals(t *testing.T) {
	ts, f := startTrustServer(t)
	h := std("Content-Type", "application/json", "X-Auth-Token", "alice")
	cases := []struct {
		name, body string
		token      string
		status     int
		desc       string
	}{
		{"keystone refuses", `{"subscriber":"trust+http://h/x"}`, "refused", 403,
			"The identity service refused the trust that notifies a trust+ subscriber: You are not authorized to perform the requested action: identity:create_trust."},
		{"client trust_id", `{"subscriber":"trust+http://h/x","options":{"trust_id":"someone-elses"}}`, "alice", 400, errTrustOption.desc},
		{"client trust_id on http", `{"subscriber":"http://h/x","options":{"trust_id":"x"}}`, "alice", 400, errTrustOption.desc},
		{"token header of a trust", `{"subscriber":"trust+http://h/x","options":{"post_headers":{"x-auth-token":"t"}}}`, "alice", 400,
			`The header "x-auth-token" cannot be set with post_headers of a trust+ subscriber: it carries the trust's token.`},
		{"hop-by-hop header", `{"subscriber":"http://h/x","options":{"post_headers":{"Connection":"close"}}}`, "alice", 400,
			`The header "Connection" cannot be set with post_headers: hop-by-hop headers, Content-Length, Host and X-Sluice-* are the server's.`},
		{"content-length", `{"subscriber":"trust+http://h/x","options":{"post_headers":{"content-length":"3"}}}`, "alice", 400,
			`The header "content-length" cannot be set with post_headers: hop-by-hop headers, Content-Length, Host and X-Sluice-* are the server's.`},
		{"host", `{"subscriber":"http://h/x","options":{"post_headers":{"Host":"other"}}}`, "alice", 400,
			`The header "Host" cannot be set with post_headers: hop-by-hop headers, Content-Length, Host and X-Sluice-* are the server's.`},
		{"signature", `{"subscriber":"http://h/x","options":{"post_headers":{"X-Sluice-Signature":"x"}}}`, "alice", 400,
			`The header "X-Sluice-Signature" cannot be set with post_headers: hop-by-hop headers, Content-Length, Host and X-Sluice-* are the server's.`},
		{"header name", `{"subscriber":"http://h/x","options":{"post_headers":{"Bad Name":"x"}}}`, "alice", 400,
			`The post_headers name "Bad Name" is not a valid HTTP header name.`},
		{"header value", `{"subscriber":"http://h/x","options":{"post_headers":{"X-A":"a\r\nX-B: b"}}}`, "alice", 400,
			`The post_headers value of "X-A" is not a valid HTTP header value.`},
		{"header not a string", `{"subscriber":"http://h/x","options":{"post_headers":{"X-A":1}}}`, "alice", 400, errPostHeaders.desc},
		{"headers not an object", `{"subscriber":"http://h/x","options":{"post_headers":["X-A"]}}`, "alice", 400, errPostHeaders.desc},
		{"post_data not a string", `{"subscriber":"http://h/x","options":{"post_data":{"body":"$zaqar_message$"}}}`, "alice", 400, errPostData.desc},
		{"post_data null", `{"subscriber":"http://h/x","options":{"post_data":null}}`, "alice", 400, errPostData.desc},
		// Zaqar's own refusals come first.
		{"zaqar's ttl first", `{"subscriber":"trust+http://h/x","ttl":1,"options":{"post_data":1}}`, "alice", 400, errSubscriptionMin.desc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.t = t
			r := ts.do("POST", "/v2/queues/rq/subscriptions", std("Content-Type", "application/json", "X-Auth-Token", tc.token), tc.body)
			if r.status != tc.status || r.json(t)["description"] != tc.desc {
				t.Errorf("%d %s\nwant %d %s", r.status, r.body, tc.status, tc.desc)
			}
		})
	}
	ts.t = t
	if r := ts.must(200, "GET", "/v2/queues/rq/subscriptions", h, ""); r.body != `{"subscriptions":[],"links":[]}` {
		t.Errorf("refusals stored %s", r.body)
	}
	if live := f.liveIDs(); len(live) != 0 {
		t.Errorf("refusals left trusts %v", live)
	}
	// Allowed: a static token for a plain subscriber, Zaqar's headers.
	ts.must(201, "POST", "/v2/queues/rq/subscriptions", h, `{"subscriber":"http://h/x","options":{"post_headers":{"X-Auth-Token":"static","Content-Type":"text/plain"}}}`)

	// PATCH: another trust id, or a token header once trust+, is refused
	// and changes nothing.
	id := ts.must(201, "POST", "/v2/queues/rq/subscriptions", h, `{"subscriber":"trust+http://h/y"}`).json(t)["subscription_id"].(string)
	ts.must(400, "PATCH", "/v2/queues/rq/subscriptions/"+id, h, `{"options":{"trust_id":"trust-99"}}`)
	ts.must(400, "PATCH", "/v2/queues/rq/subscriptions/"+id, h, `{"options":{"post_headers":{"X-Auth-Token":"t"}}}`)
	// Another user who may not delegate cannot change what is sent.
	refused := std("Content-Type", "application/json", "X-Auth-Token", "refused")
	ts.must(403, "PATCH", "/v2/queues/rq/subscriptions/"+id, refused, `{"ttl":600}`)
	ts.must(403, "PATCH", "/v2/queues/rq/subscriptions/"+id, refused, `{"options":{"post_data":"{}"}}`)
	if sub := ts.stored(t, "rq", id); sub.Options["trust_id"] != "trust-1" || sub.TTL != time.Hour {
		t.Errorf("refused patches changed %v %v", sub.Options, sub.TTL)
	}
	plain := ts.must(201, "POST", "/v2/queues/rq/subscriptions", h, `{"subscriber":"http://h/z","options":{"post_headers":{"X-Auth-Token":"static"}}}`).json(t)["subscription_id"].(string)
	ts.must(400, "PATCH", "/v2/queues/rq/subscriptions/"+plain, h, `{"subscriber":"trust+http://h/z"}`)
}

// TestTrustSubscriberNeedsKeystone: without Keystone a trust+ subscriber is
// refused with a 400 saying why (Zaqar fails with a 503), and nothing is
// stored.
func TestTrustSubscriberNeedsKeystone(t *testing.T) {
	ts := startServer(t, nil)
	h := std("Content-Type", "application/json")
	r := ts.must(400, "POST", "/v2/queues/sq/subscriptions", h, `{"subscriber":"trust+https://h/x","ttl":60}`)
	if r.json(t)["description"] != errTrustNeedsKeystone.desc {
		t.Errorf("body %s", r.body)
	}
	id := ts.must(201, "POST", "/v2/queues/sq/subscriptions", h, `{"subscriber":"https://h/x"}`).json(t)["subscription_id"].(string)
	ts.must(400, "PATCH", "/v2/queues/sq/subscriptions/"+id, h, `{"subscriber":"TRUST+https://h/x"}`)
	if n := len(ts.must(200, "GET", "/v2/queues/sq/subscriptions", h, "").json(t)["subscriptions"].([]any)); n != 1 {
		t.Errorf("%d subscriptions, want 1", n)
	}
}
