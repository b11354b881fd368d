package pooling

import (
	"math/rand/v2"
	"testing"

	"sluice.dev/server/internal/storage"
)

// TestListMarkersRoundTrip: every marker the pooled driver makes parses
// back to what made it, and reaches the right backend as the right
// marker: on the pool that made it as that pool's marker, on any other
// (the queue moved since) as the last message listed. Markers of earlier
// versions are still read.
func TestListMarkersRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	backendMarkers := []string{"", "17", "1795700331530395.3d4e83c0-9bee-4ec3-acde-ad89f5d0447f", "moved~x", "pool~a~b", "a~b~c"}
	pools := []string{"src", "dst", "pool~with~tildes"}
	for i := 0; i < 1000; i++ {
		pool, other := pools[rng.IntN(len(pools))], pools[rng.IntN(len(pools))]
		marker := backendMarkers[rng.IntN(len(backendMarkers))]
		lastID := ""
		if rng.IntN(3) > 0 {
			lastID = storage.NewID()
		}
		for _, s := range []string{poolListMarker(pool, lastID, marker), legacyPoolMarker + poolTag(pool) + "~" + lastID + "~" + marker} {
			got := parseListMarker(s)
			want := listMarker{pool: poolTag(pool), lastID: lastID, marker: marker}
			if got != want {
				t.Fatalf("parse(%q) = %+v, want %+v", s, got, want)
			}
			if !got.madeBy(pool) || got.on(pool) != marker {
				t.Fatalf("%q on its own pool = %q, want %q", s, got.on(pool), marker)
			}
			if other != pool && (got.madeBy(other) || got.on(other) != lastID) {
				t.Fatalf("%q on another pool = %q, want the last id %q", s, got.on(other), lastID)
			}
		}
	}
	// A move's target marker of earlier versions goes to whichever pool holds the queue.
	if got := parseListMarker(legacyTargetMarker + "41"); !got.inTarget || got.on("any") != "41" {
		t.Errorf("legacy target marker: %+v", got)
	}
	// Markers made by a backend, or by a client (Zaqar's message id form),
	// pass through; an id is also the last message listed.
	id := storage.NewID()
	for _, s := range []string{"", "41", "pool~src~not-an-id~41", "moving~src~not-an-id~41", "pool~~~41", "moving~", id} {
		got := parseListMarker(s)
		if got.on("any") != s || got.inTarget || got.madeBy("any") {
			t.Errorf("marker %q reaches a backend as %q (%+v)", s, got.on("any"), got)
		}
		if (got.lastID == id) != (s == id) {
			t.Errorf("marker %q: last id %q", s, got.lastID)
		}
	}
}
