package pooling

import (
	"math/rand/v2"
	"testing"

	"sluice.dev/server/internal/storage"
)

// TestListMarkersRoundTrip: every marker the pooled driver makes parses
// back to what made it, and reaches the right backend as the right
// marker: a source marker on its own pool as the pool's marker, on any
// other pool (the move finished) as the last message listed.
func TestListMarkersRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	backendMarkers := []string{"", "17", "1795700331530395.3d4e83c0-9bee-4ec3-acde-ad89f5d0447f", "moved~x", "a~b~c"}
	for i := 0; i < 1000; i++ {
		m := listMarker{marker: backendMarkers[rng.IntN(len(backendMarkers))]}
		if rng.IntN(2) == 0 {
			m.inTarget = true
		} else {
			m.pool = poolTag([]string{"src", "dst", "pool~with~tildes"}[rng.IntN(3)])
			if rng.IntN(3) > 0 {
				m.lastID = storage.NewID()
			}
		}
		if got := parseListMarker(m.String()); got != m {
			t.Fatalf("parse(%q) = %+v, want %+v", m.String(), got, m)
		}
	}
	m := listMarker{pool: poolTag("src"), lastID: storage.NewID(), marker: "41"}
	if got := m.on("src"); got != "41" {
		t.Errorf("source marker on its pool = %q, want 41", got)
	}
	if got := m.on("dst"); got != m.lastID {
		t.Errorf("source marker on another pool = %q, want the last id %s", got, m.lastID)
	}
	// Markers made by a backend, or by a client (Zaqar's message id form),
	// pass through; an id is also the last message listed.
	id := storage.NewID()
	for _, s := range []string{"", "41", "moving~src~not-an-id~41", "moving~", id} {
		got := parseListMarker(s)
		if got.on("any") != s || got.inTarget {
			t.Errorf("marker %q reaches a backend as %q (%+v)", s, got.on("any"), got)
		}
		if (got.lastID == id) != (s == id) {
			t.Errorf("marker %q: last id %q", s, got.lastID)
		}
	}
}
