package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/testutil"
)

// fakeTrusts hands out "<trust>#<n>" tokens for project p, failing the
// first fails calls.
type fakeTrusts struct {
	mu      sync.Mutex
	fails   int
	calls   int
	project string
	refused []string
}

func (f *fakeTrusts) Token(_ context.Context, trustID string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fails {
		return "", "", errors.New("identity service unavailable")
	}
	return fmt.Sprintf("%s#%d", trustID, f.calls), f.project, nil
}

func (f *fakeTrusts) Refused(trustID, token string) {
	f.mu.Lock()
	f.refused = append(f.refused, token)
	f.mu.Unlock()
}

// TestTrustSubscriberPostedWithToken: a trust+ subscriber gets the trust's
// token as X-Auth-Token, its post_data and post_headers applied, and a
// stored post_headers X-Auth-Token or reserved header never wins. While no
// token can be had the delivery is retried, never sent without one.
func TestTrustSubscriberPostedWithToken(t *testing.T) {
	drv := memory.New(storage.Options{})
	rcv := testutil.StartWebhook(t)
	q := storage.QueueRef{Project: "p", Name: "sq"}
	subscribe(t, drv, q, "trust+"+rcv.URL("/v2/queues/copy/messages"), storage.Metadata{
		TrustOption: "trust-1",
		"post_data": `{"messages": [{"body": "$zaqar_message$", "ttl": 60}]}`,
		// As an older server may have stored them.
		"post_headers": map[string]any{"X-Project-ID": "p", "X-Auth-Token": "forged", "Host": "elsewhere", "Content-Length": "1"},
	})
	trusts := &fakeTrusts{fails: 2, project: "p"}
	opts := testOptions()
	opts.Trusts = trusts
	obs := &counter{}
	e := startEngine(t, drv, opts, obs)
	post(t, drv, q, 300*time.Second, `{"n":1}`)
	e.Wake()
	testutil.Eventually(t, 10*time.Second, "a delivery", func() bool { return len(rcv.Received()) == 1 })
	g := rcv.Received()[0]
	if tok := g.Header.Get("X-Auth-Token"); tok != "trust-1#3" {
		t.Errorf("X-Auth-Token %q, want the third (first successful) token", tok)
	}
	if g.Header.Get("X-Project-ID") != "p" || g.Path != "/v2/queues/copy/messages" {
		t.Errorf("request %s %v", g.Path, g.Header)
	}
	want := `{"messages": [{"body": {"ttl": 300, "body": {"n":1}, "Message_Type": "Notification", "queue_name": "sq"}, "ttl": 60}]}`
	if string(g.Body) != want {
		t.Errorf("body %s\nwant %s", g.Body, want)
	}
	testutil.Eventually(t, 5*time.Second, "acknowledged", func() bool { return stats(t, drv, q).Delivered == 1 })
	obs.mu.Lock()
	retried := obs.retried
	obs.mu.Unlock()
	if retried != 2 {
		t.Errorf("%d retries while no token could be had, want 2", retried)
	}
}

// TestTrustSubscriberNeverUnauthenticated: without a trust service, without
// a stored trust, or with a trust of another project, nothing is sent and
// the reason is the delivery's last error.
func TestTrustSubscriberNeverUnauthenticated(t *testing.T) {
	cases := []struct {
		name   string
		trusts Trusts
		opts   storage.Metadata
		reason string
	}{
		{"no trust service", nil, storage.Metadata{TrustOption: "trust-1"}, "need --auth keystone"},
		{"no trust", &fakeTrusts{project: "p"}, storage.Metadata{}, "has no Keystone trust"},
		{"another project's trust", &fakeTrusts{project: "other"}, storage.Metadata{TrustOption: "trust-1"}, "for another project"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			drv := memory.New(storage.Options{})
			rcv := testutil.StartWebhook(t)
			q := storage.QueueRef{Project: "p", Name: "sq"}
			subscribe(t, drv, q, "trust+"+rcv.URL("/hook"), tc.opts)
			opts := testOptions()
			opts.Trusts = tc.trusts
			e := startEngine(t, drv, opts, nil)
			post(t, drv, q, 300*time.Second, `{"n":1}`)
			e.Wake()
			testutil.Eventually(t, 10*time.Second, "a failed attempt", func() bool {
				return strings.Contains(stats(t, drv, q).LastError, tc.reason)
			})
			if n := len(rcv.Received()); n != 0 {
				t.Errorf("%d requests reached the subscriber", n)
			}
		})
	}
}

// TestTrustTokenRefusedByReceiver: a 401 drops the token, and the retry
// gets another.
func TestTrustTokenRefusedByReceiver(t *testing.T) {
	drv := memory.New(storage.Options{})
	rcv := testutil.StartWebhook(t)
	rcv.SetStatus(http.StatusUnauthorized)
	q := storage.QueueRef{Project: "p", Name: "sq"}
	subscribe(t, drv, q, "trust+"+rcv.URL("/hook"), storage.Metadata{TrustOption: "trust-1"})
	trusts := &fakeTrusts{project: "p"}
	opts := testOptions()
	opts.Trusts = trusts
	e := startEngine(t, drv, opts, nil)
	post(t, drv, q, 300*time.Second, `{"n":1}`)
	e.Wake()
	testutil.Eventually(t, 10*time.Second, "a refused token", func() bool {
		trusts.mu.Lock()
		defer trusts.mu.Unlock()
		return len(trusts.refused) > 0 && trusts.refused[0] == "trust-1#1"
	})
	rcv.SetStatus(0)
	testutil.Eventually(t, 10*time.Second, "delivered", func() bool { return len(rcv.Received()) == 1 })
	if tok := rcv.Received()[0].Header.Get("X-Auth-Token"); tok == "trust-1#1" || !strings.HasPrefix(tok, "trust-1#") {
		t.Errorf("retried with %q", tok)
	}
}

// TestTrustTokenNotRedirectedElsewhere: a redirect on the subscriber's own
// host is followed with the token; one to another host is not, and the
// attempt fails.
func TestTrustTokenNotRedirectedElsewhere(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // path -> X-Auth-Token, on the other host
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("X-Auth-Token")
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	var own *httptest.Server
	own = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, own.URL+"/here", http.StatusTemporaryRedirect)
		case "/here":
			mu.Lock()
			seen["own"] = r.Header.Get("X-Auth-Token")
			mu.Unlock()
		}
	}))
	t.Cleanup(own.Close)
	w := newWebhook(2*time.Second, 4, &fakeTrusts{project: "p"})
	q := storage.QueueRef{Project: "p", Name: "sq"}
	ctx := context.Background()
	err := w.post(ctx, q, storage.Subscription{Subscriber: "trust+" + own.URL + "/away", Options: storage.Metadata{TrustOption: "t"}}, "", []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("redirect to another host: %v", err)
	}
	if err := w.post(ctx, q, storage.Subscription{Subscriber: "trust+" + own.URL + "/moved", Options: storage.Metadata{TrustOption: "t"}}, "", []byte("{}")); err != nil {
		t.Errorf("redirect on the same host: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := seen["/stolen"]; ok {
		t.Errorf("the other host got a request (token %q)", seen["/stolen"])
	}
	if !strings.HasPrefix(seen["own"], "t#") {
		t.Errorf("same-host redirect token %q", seen["own"])
	}
}
