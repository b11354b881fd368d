package auth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// trustStandIn answers the Keystone calls of trusts as Keystone 30 does;
// the real one drives them in e2e/compat/test_keystone_trusts.py. It
// keeps the last trust request's body.
func trustStandIn(t *testing.T, last *map[string]any) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		var doc map[string]any
		json.NewDecoder(r.Body).Decode(&doc)
		scope := doc["auth"].(map[string]any)["scope"].(map[string]any)
		if tr, ok := scope["OS-TRUST:trust"].(map[string]any); ok {
			if tr["id"] != "trust-1" {
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"error":{"code":404,"message":"Could not find trust: x.","title":"Not Found"}}`))
				return
			}
			w.Header().Set("X-Subject-Token", "trust-token")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","project":{"id":"proj-a"},"user":{"id":"alice-id"}}}`))
			return
		}
		w.Header().Set("X-Subject-Token", "svc")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"service"}}}`))
	})
	mux.HandleFunc("GET /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Subject-Token") {
		case "svc":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"service"},"user":{"id":"svc-id"}}}`))
		case "alice", "reader":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00Z","project":{"id":"proj-a"},"user":{"id":"alice-id"},"roles":[{"id":"r-member","name":"member"},{"id":"r-reader","name":"reader"}]}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	mux.HandleFunc("POST /v3/OS-TRUST/trusts", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, last)
		switch r.Header.Get("X-Auth-Token") {
		case "alice":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"trust":{"id":"trust-1"}}`))
		case "reader":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":403,"message":"You are not authorized to perform the requested action: identity:create_trust.","title":"Forbidden"}}`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	mux.HandleFunc("DELETE /v3/OS-TRUST/trusts/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Auth-Token") != "trust-token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	ks := httptest.NewServer(mux)
	t.Cleanup(ks.Close)
	return ks
}

// TestTrustCalls: the requests Keystone's trust API takes, and its
// refusals as the errors the API layer words.
func TestTrustCalls(t *testing.T) {
	var last map[string]any
	ks := trustStandIn(t, &last)
	c, err := NewClient(ks.URL, Credentials{Username: "sluice", Password: "pw", UserDomain: "Default",
		Project: "service", ProjectDomain: "Default"}, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTrusts(c, 10)
	ctx := context.Background()
	exp := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	id, err := tr.Create(ctx, "alice", exp)
	if err != nil || id != "trust-1" {
		t.Fatalf("create %q %v", id, err)
	}
	want := `{"trust":{"expires_at":"2030-05-06T07:08:09.000000Z","impersonation":true,"project_id":"proj-a",` +
		`"roles":[{"id":"r-member"},{"id":"r-reader"}],"trustee_user_id":"svc-id","trustor_user_id":"alice-id"}}`
	if got, _ := json.Marshal(last); string(got) != want {
		t.Errorf("trust request\n %s\nwant\n %s", got, want)
	}

	_, err = tr.Create(ctx, "reader", exp)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Status != 403 || refused.Message != "You are not authorized to perform the requested action: identity:create_trust." {
		t.Errorf("refused create: %v", err)
	}
	if _, err := tr.Create(ctx, "unknown", exp); !errors.Is(err, ErrInvalid) {
		t.Errorf("create with an invalid token: %v", err)
	}

	tok, project, err := tr.Token(ctx, "trust-1")
	if err != nil || tok != "trust-token" || project != "proj-a" {
		t.Errorf("token %q %q %v", tok, project, err)
	}
	if _, _, err := tr.Token(ctx, "other"); !errors.As(err, &refused) || refused.Status != 404 {
		t.Errorf("token of an unknown trust: %v", err)
	}
	if err := tr.Delete(ctx, "trust-1", "alice"); err != nil {
		t.Errorf("delete: %v", err)
	}
}
