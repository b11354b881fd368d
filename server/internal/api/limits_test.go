package api

import (
	"net/url"
	"strings"
	"testing"
)

// TestPostLocationBounded: a large batch answers 201 with a Location short
// enough for proxies and clients, and every id in the body. Before, a
// batch of 20,000 messages answered with a 740 KB Location header.
func TestPostLocationBounded(t *testing.T) {
	ts := startServer(t, nil)
	for _, n := range []int{1, 100, 20000} {
		batch := `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"body":1},`, n), ",") + `]}`
		r := ts.must(201, "POST", "/v2/queues/batch/messages", std(), batch)
		loc := r.header.Get("Location")
		if len(loc) > maxLocationBytes {
			t.Errorf("%d messages: Location of %d bytes", n, len(loc))
		}
		res := r.json(t)["resources"].([]any)
		if len(res) != n {
			t.Fatalf("%d messages: %d resources", n, len(res))
		}
		if n <= 100 {
			// Small batches keep Zaqar's ?ids= form, listing every id.
			u, _ := url.Parse(loc)
			ids := strings.Split(u.Query().Get("ids"), ",")
			if u.Path != "/v2/queues/batch/messages" || len(ids) != n || !strings.HasSuffix(res[n-1].(string), "/"+ids[n-1]) {
				t.Errorf("%d messages: Location %q", n, loc)
			}
		} else if loc != "/v2/queues/batch/messages" {
			t.Errorf("%d messages: Location %q", n, loc)
		}
	}
}

// TestMetadataBodiesBounded: PUT and PATCH bodies of a queue are bounded by
// max-queue-metadata before being read, as Zaqar's queue_metadata_length
// bounds them; before, a PATCH body was read up to max-body-bytes (1 MiB).
func TestMetadataBodiesBounded(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(201, "PUT", "/v2/queues/lim", std(), "")
	// The result would be small: only the body is too large.
	big := `[{"op":"add","path":"/metadata/x","value":"` + strings.Repeat("x", 70000) + `"},{"op":"remove","path":"/metadata/x"}]`
	r := ts.do("PATCH", "/v2/queues/lim", std("Content-Type", patchMediaType), big)
	if m := r.json(t); r.status != 400 || m["title"] != "Invalid request body" || m["description"] != "Queue metadata is too large. Max size: 65536" {
		t.Errorf("PATCH of %d bytes: %d %s", len(big), r.status, r.body)
	}
	// Reserved integers beyond int64 are out of range, not "not integers".
	r = ts.do("PUT", "/v2/queues/lim2", std(), `{"_default_message_ttl":123456789012345678901234567890}`)
	if m := r.json(t); r.status != 400 || !strings.HasPrefix(m["description"].(string), "_default_message_ttl can not exceed") {
		t.Errorf("huge ttl: %d %s", r.status, r.body)
	}
	// Ordinary keys keep them exactly.
	ts.must(201, "PUT", "/v2/queues/lim3", std(), `{"n":123456789012345678901234567890}`)
	if b := ts.must(200, "GET", "/v2/queues/lim3", std(), "").body; !strings.Contains(b, `"n":123456789012345678901234567890`) {
		t.Errorf("metadata %s", b)
	}
}
