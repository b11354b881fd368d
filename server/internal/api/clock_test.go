package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
)

// TestAgesUseTheDriversClock: message and claim ages are measured on the
// clock the driver decides expiry by, not the wall clock, so a message
// shown 30 s old is one the store also holds 30 s old.
func TestAgesUseTheDriversClock(t *testing.T) {
	clock := storagetest.NewClock()
	drv, err := storage.Open(context.Background(), "memory", storage.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	opts := config.Defaults()
	opts.AccessLog = false
	s := New(opts, drv, nil, nil)
	s.SetClock(clock)
	hs := httptest.NewServer(s)
	defer hs.Close()
	call := func(want int, method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Client-ID", testClient)
		req.Header.Set("X-Project-ID", "p1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		return doc
	}
	posted := call(201, "POST", "/v2/queues/q/messages", `{"messages":[{"ttl":3600,"body":1}]}`)
	href := posted["resources"].([]any)[0].(string)
	clock.Advance(30 * time.Second)
	if age := call(200, "GET", href, "")["age"]; age != 30.0 {
		t.Errorf("message age %v after the driver's clock moved 30 s, want 30", age)
	}
	msgs := call(200, "GET", "/v2/queues/q/messages?echo=true", "")["messages"].([]any)
	if age := msgs[0].(map[string]any)["age"]; age != 30.0 {
		t.Errorf("listed message age %v, want 30", age)
	}
	claim := call(201, "POST", "/v2/queues/q/claims", `{"ttl":300,"grace":60}`)
	if age := claim["messages"].([]any)[0].(map[string]any)["age"]; age != 30.0 {
		t.Errorf("claimed message age %v, want 30", age)
	}
	stats := call(200, "GET", "/v2/queues/q/stats", "")["messages"].(map[string]any)
	if age := stats["oldest"].(map[string]any)["age"]; age != 30.0 {
		t.Errorf("oldest message age %v, want 30", age)
	}
}
