package api

import (
	"context"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
)

// TestAgesUseTheDriversClock: message ages are measured on the clock the
// driver decides expiry by, not the wall clock, so a message shown 30 s old
// is one the store also holds 30 s old.
func TestAgesUseTheDriversClock(t *testing.T) {
	clock := storagetest.NewClock()
	drv, err := storage.Open(context.Background(), "memory", storage.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	s := New(config.Defaults(), drv, nil, nil)
	s.SetClock(clock)
	ts := serve(t, s)
	posted := ts.must(201, "POST", "/v2/queues/q/messages", std(), `{"messages":[{"ttl":3600,"body":1}]}`).json(t)
	href := posted["resources"].([]any)[0].(string)
	clock.Advance(30 * time.Second)
	age := func(doc any) any { return doc.(map[string]any)["age"] }
	if a := age(ts.must(200, "GET", href, std(), "").json(t)); a != 30.0 {
		t.Errorf("message age %v after the driver's clock moved 30 s, want 30", a)
	}
	listed := ts.must(200, "GET", "/v2/queues/q/messages?echo=true", std(), "").json(t)["messages"].([]any)
	if a := age(listed[0]); a != 30.0 {
		t.Errorf("listed message age %v, want 30", a)
	}
	claimed := ts.must(201, "POST", "/v2/queues/q/claims", std(), `{"ttl":300,"grace":60}`).json(t)["messages"].([]any)
	if a := age(claimed[0]); a != 30.0 {
		t.Errorf("claimed message age %v, want 30", a)
	}
	stats := ts.must(200, "GET", "/v2/queues/q/stats", std(), "").json(t)["messages"].(map[string]any)
	if a := age(stats["oldest"]); a != 30.0 {
		t.Errorf("oldest message age %v, want 30", a)
	}
}
