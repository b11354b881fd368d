package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
)

// TestListingPastHiddenMessages: with more hidden messages (the caller's
// own without echo, or claimed) ahead of a visible one than a driver scans
// per call, following next links must reach the visible message; an empty
// page is only the end when it has no next link.
func TestListingPastHiddenMessages(t *testing.T) { forEachStore(t, testListingPastHiddenMessages) }

func testListingPastHiddenMessages(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	const hidden = 2500
	post := func(client string, n int, body string) {
		var b strings.Builder
		b.WriteString(`{"messages":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"body":%q}`, body)
		}
		b.WriteString(`]}`)
		ts.must(201, "POST", "/v2/queues/deep/messages", std("Client-ID", client), b.String())
	}
	self := "c1a1b1d1-0000-4000-8000-000000000001"
	other := "c1a1b1d1-0000-4000-8000-000000000002"
	for range hidden / 100 {
		post(self, 100, "mine")
	}
	post(other, 1, "visible")
	if n := walkMessages(t, ts, "/v2/queues/deep/messages?limit=10", self); n != 1 {
		t.Errorf("walking the pages past %d own messages found %d visible, want 1", hidden, n)
	}
	// Claimed messages (all hidden+1 so far) hide the same way from a
	// listing without include_claimed.
	for range hidden / 20 {
		ts.must(201, "POST", "/v2/queues/deep/claims?limit=20", std("Client-ID", other), `{"ttl":300,"grace":60}`)
	}
	ts.must(201, "POST", "/v2/queues/deep/claims?limit=1", std("Client-ID", other), `{"ttl":300,"grace":60}`)
	post(self, 1, "free")
	if n := walkMessages(t, ts, "/v2/queues/deep/messages?limit=10&echo=true", other); n != 1 {
		t.Errorf("walking the pages past claimed messages found %d free, want 1", n)
	}
}

// walkMessages follows next links from path (bounded) and counts messages.
func walkMessages(t *testing.T, ts *testServer, path, client string) int {
	t.Helper()
	found := 0
	for page := 0; page < 50; page++ {
		r := ts.must(200, "GET", path, std("Client-ID", client), "")
		var body struct {
			Messages []json.RawMessage       `json:"messages"`
			Links    []struct{ Href string } `json:"links"`
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil {
			t.Fatalf("page %s: %v", r.body, err)
		}
		found += len(body.Messages)
		if len(body.Links) == 0 {
			return found
		}
		path = body.Links[0].Href
	}
	t.Fatalf("more than 50 pages")
	return found
}
