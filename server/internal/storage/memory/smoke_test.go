package memory

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// TestLifecycle walks one message through post, claim, expiry and delete;
// the full behaviour is covered by the storagetest conformance suite.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	clock := &fixedClock{t: time.Unix(1_700_000_000, 0)}
	d := New(storage.Options{Clock: clock})
	q := storage.QueueRef{Project: "p", Name: "q"}
	ids, err := d.Messages().Post(ctx, q, "c1", []storage.NewMessage{
		{TTL: time.Minute, Body: json.RawMessage(`1`)},
		{TTL: time.Minute, Body: json.RawMessage(`2`)},
	})
	if err != nil || len(ids) != 2 {
		t.Fatalf("post: %v %v", ids, err)
	}
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: 30 * time.Second, Grace: 60 * time.Second, Limit: 1})
	if err != nil || len(c.Messages) != 1 || c.Messages[0].ID != ids[0] {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if got := c.Messages[0].TTL; got != 90*time.Second {
		t.Errorf("claimed ttl = %v, want raised to 90s", got)
	}
	if err := d.Messages().Delete(ctx, q, ids[0], ""); !storage.Is(err, storage.Forbidden) {
		t.Errorf("delete claimed without claim id: %v", err)
	}
	clock.t = clock.t.Add(31 * time.Second)
	c2, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: 30 * time.Second, Grace: 60 * time.Second, Limit: 5})
	if err != nil || len(c2.Messages) != 2 {
		t.Fatalf("claim after expiry: %+v %v", c2, err)
	}
	if err := d.Messages().Delete(ctx, q, ids[0], c2.ID); err != nil {
		t.Fatal(err)
	}
	st, _ := d.Queues().Stats(ctx, q)
	if st.Total != 1 || st.Claimed != 1 {
		t.Errorf("stats %+v", st)
	}
}
