package storagetest

import (
	"encoding/json"
	"time"

	"sluice.dev/server/internal/storage"
)

var listingCases = []testCase{
	{"Listing/ProgressPastHidden", testListingProgress},
}

// testListingProgress: following markers from page to page reaches a
// visible message behind many hidden ones (own without echo), whatever
// scan budget the driver has; a page may come back empty only with a marker
// onwards, and the walk ends.
func testListingProgress(e *env) {
	const hidden = 2500
	q := e.queue("deep")
	msgs := make([]storage.NewMessage, hidden)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(`"mine"`)}
	}
	if _, err := e.d.Messages().Post(e.ctx, q, "self", msgs); err != nil {
		e.t.Fatal(err)
	}
	want := e.post(q, "other", 1, time.Hour)
	var found []string
	marker := ""
	for page := 0; ; page++ {
		if page > hidden {
			e.t.Fatalf("listing did not end after %d pages", page)
		}
		got, next, err := e.d.Messages().List(e.ctx, q, storage.ListMessagesOptions{Marker: marker, Limit: 5, ClientID: "self"})
		if err != nil {
			e.t.Fatal(err)
		}
		found = append(found, messageIDs(got)...)
		if next == "" {
			break
		}
		if next == marker {
			e.t.Fatalf("listing made no progress at marker %q", marker)
		}
		marker = next
	}
	if !equalStrings(found, want) {
		e.t.Errorf("walk found %v, want %v", found, want)
	}
}
