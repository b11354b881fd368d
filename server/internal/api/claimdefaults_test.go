package api

import (
	"testing"

	"sluice.dev/server/internal/config"
)

// TestClaimPatchDefaults: PATCH of a claim with {} renews it with the
// default claim ttl (300) as Zaqar does; a grace alone keeps the default
// ttl too. Before, sluice answered 400 "Missing ttl".
func TestClaimPatchDefaults(t *testing.T) { forEachStore(t, testClaimPatchDefaults) }

func testClaimPatchDefaults(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "POST", "/v2/queues/cd/messages", std(), `{"messages":[{"body":1}]}`)
	r := ts.must(201, "POST", "/v2/queues/cd/claims", std(), `{"ttl":60,"grace":60}`)
	href := r.header.Get("Location")
	for _, body := range []string{`{}`, `{"grace":30}`} {
		ts.must(204, "PATCH", href, std(), body)
		if c := ts.must(200, "GET", href, std(), "").json(t); c["ttl"] != 300.0 {
			t.Errorf("PATCH %s: claim ttl %v, want the default 300", body, c["ttl"])
		}
	}
	// An update still needs a document: an empty body is unparsable.
	ts.must(400, "PATCH", href, std(), "")
}
