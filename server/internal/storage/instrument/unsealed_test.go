package instrument_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/instrument"
	"sluice.dev/server/internal/storage/memory"
)

// TestRefusesUnsealedPosts: a post still asking for encryption has passed
// no encryption wrapper; it is refused whole rather than stored in the clear.
func TestRefusesUnsealedPosts(t *testing.T) {
	d, err := instrument.Wrap(memory.New(storage.Options{}), "memory", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, q := context.Background(), storage.QueueRef{Project: "p", Name: "q"}
	msgs := []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}, {TTL: time.Hour, Body: json.RawMessage(`"x"`), Encrypt: true}}
	if _, err := d.Messages().Post(ctx, q, "c", msgs); !storage.Is(err, storage.Internal) {
		t.Fatalf("post: %v, want Internal", err)
	}
	if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != 0 {
		t.Errorf("stored %d messages (%v)", st.Total, err)
	}
}
