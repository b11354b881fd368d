package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// The real Keystone runs in the compatibility suite (e2e/compat); this
// stand-in pins the protocol cases that are hard to provoke there: the
// service token expiring between calls, Keystone failing with 5xx, an
// unscoped token, a document without expiry.
func fakeKeystoneServer(t *testing.T, validate func(w http.ResponseWriter, subject string)) (*httptest.Server, *atomic.Int32) {
	var issued atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		var doc map[string]map[string]map[string]any
		json.NewDecoder(r.Body).Decode(&doc)
		pw := doc["auth"]["identity"]["password"].(map[string]any)["user"].(map[string]any)["password"]
		if pw != "svc-pass" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		n := issued.Add(1)
		w.Header().Set("X-Subject-Token", "svc-"+string(rune('0'+n)))
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","project":{"id":"svc"}}}`))
	})
	mux.HandleFunc("GET /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Auth-Token") != "svc-"+string(rune('0'+issued.Load())) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		validate(w, r.Header.Get("X-Subject-Token"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &issued
}

func TestClientValidate(t *testing.T) {
	srv, issued := fakeKeystoneServer(t, func(w http.ResponseWriter, subject string) {
		switch subject {
		case "member":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","project":{"id":"p1"},"roles":[{"name":"member"}]}}`))
		case "admin":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","project":{"id":"p2"},"roles":[{"name":"reader"},{"name":"admin"}]}}`))
		case "domain":
			w.Write([]byte(`{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","domain":{"id":"d"},"roles":[{"name":"admin"}]}}`))
		case "noexpiry":
			w.Write([]byte(`{"token":{"project":{"id":"p1"}}}`))
		case "boom":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	cl, err := NewClient(srv.URL, Credentials{Username: "sluice", Password: "svc-pass", Project: "service"}, "", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ue *UnavailableError
	cases := []struct {
		token   string
		project string
		admin   bool
		check   func(error) bool
	}{
		{"member", "p1", false, nil},
		{"admin", "p2", true, nil},
		{"revoked", "", false, func(err error) bool { return errors.Is(err, ErrInvalid) }},
		{"domain", "", false, func(err error) bool { return errors.Is(err, ErrUnscoped) }},
		{"noexpiry", "", false, func(err error) bool { return errors.As(err, &ue) }},
		{"boom", "", false, func(err error) bool { return errors.As(err, &ue) }},
	}
	for _, tc := range cases {
		id, err := cl.Validate(ctx, tc.token)
		if tc.check != nil {
			if !tc.check(err) {
				t.Errorf("%s: error %v", tc.token, err)
			}
			continue
		}
		if err != nil || id.Project != tc.project || id.Admin != tc.admin || id.Expires.Year() != 2099 {
			t.Errorf("%s: %+v %v", tc.token, id, err)
		}
	}
	if issued.Load() != 1 {
		t.Errorf("service token issued %d times, want once for all calls", issued.Load())
	}
	// Keystone forgets our service token: one 401, a new token, success.
	issued.Add(1)
	if _, err := cl.Validate(ctx, "member"); err != nil || issued.Load() != 3 {
		t.Errorf("after service token loss: %v, %d issued", err, issued.Load())
	}
}

func TestClientUnavailable(t *testing.T) {
	srv, _ := fakeKeystoneServer(t, func(w http.ResponseWriter, _ string) {})
	var ue *UnavailableError
	bad, _ := NewClient(srv.URL+"/v3/", Credentials{Username: "sluice", Password: "wrong", Project: "service"}, "", time.Second)
	if _, err := bad.Validate(context.Background(), "member"); !errors.As(err, &ue) {
		t.Errorf("wrong service password must never let a token through: %v", err)
	}
	srv.Close()
	down, _ := NewClient(srv.URL, Credentials{Username: "sluice", Password: "svc-pass", Project: "service"}, "", time.Second)
	if _, err := down.Validate(context.Background(), "member"); !errors.As(err, &ue) {
		t.Errorf("Keystone down: %v", err)
	}
	if _, err := NewClient(srv.URL, Credentials{}, "/no/such/ca.pem", time.Second); err == nil {
		t.Error("a missing CA file must be an error")
	}
}
