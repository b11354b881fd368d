package api

import (
	"encoding/json"
	"strings"
	"testing"

	"sluice.dev/server/internal/storage"
)

// TestSubscriptionErrors checks status, title and description of every
// refusal recorded from Zaqar 23.0.1 (zaqar-v2-subscriptions.md).
func TestSubscriptionErrors(t *testing.T) {
	ts := startServer(t, nil)
	id := ts.must(201, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"http://127.0.0.1:8899/hook","ttl":3600}`).json(t)["subscription_id"].(string)
	const types = "The subscriber type of subscription must be supported in the list ['http', 'https', 'mailto', 'trust+http', 'trust+https']."
	cases := []struct {
		name, method, path, body string
		status                   int
		title, desc              string
	}{
		{"no body", "POST", "/v2/queues/sq/subscriptions", "", 400, "Invalid API request", "Missing parameter subscriber in body."},
		{"empty object", "POST", "/v2/queues/sq/subscriptions", `{}`, 400, "Invalid API request", "Missing parameter subscriber in body."},
		{"not a url", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"not a url","ttl":60}`, 400, "Invalid API request", types},
		{"unsupported scheme", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"email://x@example.com","ttl":60}`, 400, "Invalid API request", types},
		{"mailto without an address", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"mailto:"}`, 400, "Invalid API request", `The subscriber "mailto:" names no mail address (mailto:user@host).`},
		{"webhook without a host", "PATCH", "/v2/queues/sq/subscriptions/" + id, `{"subscriber":"https:///hook"}`, 400, "Invalid API request", `The subscriber "https:///hook" names no host to deliver to.`},
		{"webhook with a bad escape", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://exa%zzmple.com/hook"}`, 400, "Invalid API request", `The subscriber "http://exa%zzmple.com/hook" is not a valid URL: invalid URL escape "%zz".`},
		{"webhook with a bad port", "PATCH", "/v2/queues/sq/subscriptions/" + id, `{"subscriber":"https://h:x/"}`, 400, "Invalid API request", `The subscriber "https://h:x/" is not a valid URL: invalid port ":x" after host.`},
		{"mailto with a control character", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"mailto:o\u0000ps@example.com"}`, 400, "Invalid API request", `The subscriber "mailto:o\x00ps@example.com" is not a valid URL: net/url: invalid control character in URL.`},
		{"bad webhook URL before bad ttl", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://[::1/","ttl":"60"}`, 400, "Invalid API request", "TTL must be an integer."},
		{"subscriber not a string", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":7}`, 400, "Invalid API request", types},
		{"ttl not an int", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://127.0.0.1:8899/x","ttl":"abc"}`, 400, "Invalid API request", "TTL must be an integer."},
		{"ttl a float", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://127.0.0.1:8899/x","ttl":60.5}`, 400, "Invalid API request", "TTL must be an integer."},
		{"options not a dict", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://127.0.0.1:8899/x","ttl":60,"options":"x"}`, 400, "Invalid API request", "Options must be a dict."},
		// Where Zaqar refuses a body, both name the same fault: a
		// subscriber Zaqar skips (empty) or takes (naming nobody) is
		// refused after the checks Zaqar makes.
		{"empty subscriber and bad ttl", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"","ttl":"x"}`, 400, "Invalid API request", "TTL must be an integer."},
		{"null subscriber and bad options", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":null,"ttl":[60],"options":"x"}`, 400, "Invalid API request", "Options must be a dict."},
		{"mailto without address and bad ttl", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"mailto:","ttl":"60"}`, 400, "Invalid API request", "TTL must be an integer."},
		{"empty options and bad ttl", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://127.0.0.1:8899/x","options":[],"ttl":-0.5}`, 400, "Invalid API request", "TTL must be an integer."},
		{"unserved scheme before bad ttl", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"ftp://h/x","ttl":"60"}`, 400, "Invalid API request", "The subscriber type of subscription must be supported in the list ['http', 'https', 'mailto', 'trust+http', 'trust+https']."},
		{"ttl below minimum", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":"http://127.0.0.1:8899/x","ttl":1}`, 400, "Invalid API request", "The TTL for a subscription must be at least 60 seconds long."},
		{"malformed json", "POST", "/v2/queues/sq/subscriptions", `{"subscriber":`, 400, "Invalid request body", "Request body could not be parsed."},
		{"get unknown", "GET", "/v2/queues/sq/subscriptions/5c6939a8ef2f8e4a1c4a1a1a", "", 404, "Not found", "Subscription 5c6939a8ef2f8e4a1c4a1a1a does not exist"},
		{"get malformed id", "GET", "/v2/queues/sq/subscriptions/xyz", "", 404, "Not found", "Subscription xyz does not exist"},
		{"patch unknown", "PATCH", "/v2/queues/sq/subscriptions/5c6939a8ef2f8e4a1c4a1a1a", `{"ttl":100}`, 404, "Not found", "Subscription 5c6939a8ef2f8e4a1c4a1a1a does not exist"},
		{"patch empty", "PATCH", "/v2/queues/sq/subscriptions/" + id, `{}`, 400, "Invalid API request", "No subscription to create."},
		{"patch bad ttl", "PATCH", "/v2/queues/sq/subscriptions/" + id, `{"ttl":"x"}`, 400, "Invalid API request", "TTL must be an integer."},
		{"patch bad json", "PATCH", "/v2/queues/sq/subscriptions/" + id, `{"ttl":`, 400, "Invalid request body", "Request body could not be parsed."},
		{"patch other queue", "PATCH", "/v2/queues/nosuchq3/subscriptions/" + id, `{"ttl":100}`, 404, "Not found", "Subscription " + id + " does not exist"},
		{"confirm not bool", "PUT", "/v2/queues/sq/subscriptions/" + id + "/confirm", `{"confirmed":"yes"}`, 400, "Invalid API request", "The 'confirmed' should be boolean."},
		{"confirm no body", "PUT", "/v2/queues/sq/subscriptions/" + id + "/confirm", ``, 400, "Invalid API request", "The 'confirmed' should be boolean."},
		{"confirm unknown", "PUT", "/v2/queues/sq/subscriptions/5c6939a8ef2f8e4a1c4a1a1a/confirm", `{"confirmed":true}`, 404, "Not found", "Subscription 5c6939a8ef2f8e4a1c4a1a1a does not exist"},
		{"purge bad type", "POST", "/v2/queues/sq/purge", `{"resource_types":["nope"]}`, 400, "Invalid API request", "Resource types must be a sub set of {'subscriptions', 'messages'}."},
		{"list limit", "GET", "/v2/queues/sq/subscriptions?limit=21", "", 400, "Invalid API request", "Limit must be at least 1 and may not be greater than 20."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.t = t
			r := ts.do(tc.method, tc.path, std("Content-Type", "application/json"), tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			got := r.json(t)
			if got["title"] != tc.title || got["description"] != tc.desc {
				t.Errorf("body %s, want title %q description %q", r.body, tc.title, tc.desc)
			}
		})
	}
}

// TestSubscriptionLifecycle replays the reference's successful calls.
func TestSubscriptionLifecycle(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(200, "GET", "/v2/queues/sq/subscriptions", std(), "")
	if r := ts.must(200, "GET", "/v2/queues/sq/subscriptions", std(), ""); r.body != `{"subscriptions":[],"links":[]}` {
		t.Errorf("empty list %s", r.body)
	}
	r := ts.must(201, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"http://127.0.0.1:8899/hook","ttl":3600,"options":{"note":"a","secret":"s3"}}`)
	if r.header.Get("Location") != "/v2/queues/sq/subscriptions" {
		t.Errorf("location %q", r.header.Get("Location"))
	}
	id := r.json(t)["subscription_id"].(string)
	if again := ts.must(201, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"http://127.0.0.1:8899/hook","ttl":3600,"options":{}}`).json(t); again["subscription_id"] != id {
		t.Errorf("duplicate subscriber got %v, want the same id %s", again, id)
	}
	mail := ts.must(201, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"mailto:ops@example.com","ttl":3600,"options":{"subject":"hi"}}`).json(t)["subscription_id"].(string)
	// Without Keystone there is no trust to notify a trust+ subscriber with.
	ts.must(400, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"trust+https://example.com/x"}`)
	ts.must(201, "POST", "/v2/queues/sq/subscriptions", std(), `{"subscriber":"https://example.com/x"}`)

	got := ts.must(200, "GET", "/v2/queues/sq/subscriptions/"+id, std(), "").json(t)
	want := map[string]any{"id": id, "source": "sq", "subscriber": "http://127.0.0.1:8899/hook", "ttl": 3600.0,
		"age": 0.0, "options": map[string]any{"note": "a", "secret": "<redacted>"}, "confirmed": false}
	if js(got) != js(want) {
		t.Errorf("get %s, want %s", js(got), js(want))
	}
	list := ts.must(200, "GET", "/v2/queues/sq/subscriptions?limit=1", std(), "").json(t)
	subs, links := list["subscriptions"].([]any), list["links"].([]any)
	if len(subs) != 1 || subs[0].(map[string]any)["id"] != id {
		t.Errorf("first page %v", subs)
	}
	if href := links[0].(map[string]any)["href"]; href != "/v2/queues/sq/subscriptions?limit=1&marker="+id {
		t.Errorf("next link %v", href)
	}
	next := ts.must(200, "GET", "/v2/queues/sq/subscriptions?limit=1&marker="+id, std(), "").json(t)["subscriptions"].([]any)
	if len(next) != 1 || next[0].(map[string]any)["id"] != mail {
		t.Errorf("second page %v", next)
	}
	// PATCH with the redacted secret keeps the stored one; the ttl restarts.
	ts.must(204, "PATCH", "/v2/queues/sq/subscriptions/"+id, std(), `{"ttl":7200,"options":{"note":"b","secret":"<redacted>"}}`)
	got = ts.must(200, "GET", "/v2/queues/sq/subscriptions/"+id, std(), "").json(t)
	if got["ttl"] != 7200.0 || got["options"].(map[string]any)["note"] != "b" {
		t.Errorf("after patch %v", got)
	}
	sub, err := ts.drv.Subscriptions().Get(t.Context(), storageRef("p1", "sq"), id)
	if err != nil || sub.Options["secret"] != "s3" {
		t.Errorf("stored secret after a redacted patch: %v %v", sub.Options, err)
	}
	if r := ts.do("PATCH", "/v2/queues/sq/subscriptions/"+mail, std(), `{"subscriber":"http://127.0.0.1:8899/hook"}`); r.status != 409 {
		t.Errorf("patch to a taken subscriber: %d %s", r.status, r.body)
	}
	r = ts.must(204, "PUT", "/v2/queues/sq/subscriptions/"+id+"/confirm", std(), `{"confirmed":true}`)
	if r.header.Get("Location") != "/v2/queues/sq/subscriptions/"+id+"/confirm" {
		t.Errorf("confirm location %q", r.header.Get("Location"))
	}
	if got := ts.must(200, "GET", "/v2/queues/sq/subscriptions/"+id, std(), "").json(t); got["confirmed"] != true {
		t.Errorf("not confirmed: %v", got)
	}
	// Other projects see nothing; subscribing did not create queues.
	if r := ts.must(200, "GET", "/v2/queues/sq/subscriptions", std("X-Project-ID", "other"), ""); r.body != `{"subscriptions":[],"links":[]}` {
		t.Errorf("other project sees %s", r.body)
	}
	if r := ts.must(200, "GET", "/v2/queues", std(), ""); strings.Contains(r.body, "sq") {
		t.Errorf("subscribing created the queue: %s", r.body)
	}
	ts.must(204, "DELETE", "/v2/queues/sq/subscriptions/"+mail, std(), "")
	ts.must(404, "GET", "/v2/queues/sq/subscriptions/"+mail, std(), "")
	ts.must(204, "DELETE", "/v2/queues/sq/subscriptions/5c6939a8ef2f8e4a1c4a1a1a", std(), "")
	ts.must(204, "DELETE", "/v2/queues/nosuchq4/subscriptions/"+id, std(), "")
	ts.must(201, "POST", "/v2/queues/nosuchq/subscriptions", std(), `{"subscriber":"http://127.0.0.1:8899/y","ttl":60}`)

	// Purging messages only keeps subscriptions; purging subscriptions drops them.
	ts.must(204, "POST", "/v2/queues/sq/purge", std(), `{"resource_types":["messages"]}`)
	if n := len(ts.must(200, "GET", "/v2/queues/sq/subscriptions", std(), "").json(t)["subscriptions"].([]any)); n != 2 {
		t.Errorf("%d subscriptions after purging messages, want 2", n)
	}
	ts.must(204, "POST", "/v2/queues/sq/purge", std(), `{"resource_types":["subscriptions"]}`)
	if r := ts.must(200, "GET", "/v2/queues/sq/subscriptions", std(), ""); r.body != `{"subscriptions":[],"links":[]}` {
		t.Errorf("after purge %s", r.body)
	}
}

// TestDeliveriesEndpoint checks the shape of GET .../deliveries.
func TestDeliveriesEndpoint(t *testing.T) {
	ts := startServer(t, nil)
	empty := ts.must(200, "GET", "/v2/queues/dq/deliveries", std(), "").body
	if empty != `{"pending":0,"failed":0,"delivered":0,"last_error":null,"last_error_at":null,"subscriptions":[]}` {
		t.Errorf("empty deliveries %s", empty)
	}
	id := ts.must(201, "POST", "/v2/queues/dq/subscriptions", std(), `{"subscriber":"http://127.0.0.1:9/none"}`).json(t)["subscription_id"].(string)
	ts.must(201, "POST", "/v2/queues/dq/messages", std(), `{"messages":[{"body":1},{"body":2}]}`)
	got := ts.must(200, "GET", "/v2/queues/dq/deliveries", std(), "").json(t)
	want := map[string]any{"pending": 2.0, "failed": 0.0, "delivered": 0.0, "last_error": nil, "last_error_at": nil,
		"subscriptions": []any{map[string]any{"id": id, "subscriber": "http://127.0.0.1:9/none", "pending": 2.0,
			"failed": 0.0, "delivered": 0.0, "last_error": nil, "last_error_at": nil}}}
	if js(got) != js(want) {
		t.Errorf("deliveries %s, want %s", js(got), js(want))
	}
	if r := ts.must(200, "GET", "/v2/queues/dq/deliveries", std("X-Project-ID", "other"), ""); !strings.Contains(r.body, `"pending":0`) {
		t.Errorf("other project sees deliveries: %s", r.body)
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func storageRef(project, name string) storage.QueueRef {
	return storage.QueueRef{Project: project, Name: name}
}
