package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
)

func TestTopics(t *testing.T) {
	forEachStore(t, func(t *testing.T, store func(*config.Options)) {
		ts := startServer(t, store)
		patch := std("Content-Type", patchMediaType)

		ts.must(200, "GET", "/v2/topics", std(), "")
		r := ts.must(201, "PUT", "/v2/topics/t1", std(), `{"color":"red","_default_message_ttl":600}`)
		if r.header.Get("Location") != "/v2/topics/t1" {
			t.Errorf("Location %q", r.header.Get("Location"))
		}
		ts.must(204, "PUT", "/v2/topics/t1", std(), "")
		ts.must(201, "PUT", "/v2/topics/t2", std(), "")
		// A queue of the same name is another resource.
		ts.must(201, "PUT", "/v2/queues/t1", std(), `{"color":"blue"}`)

		r = ts.must(200, "GET", "/v2/topics/t1", std(), "")
		if r.body != `{"_default_message_ttl":600,"color":"red","_max_messages_post_size":262144,"_default_message_delay":0}` {
			t.Errorf("topic metadata %s", r.body)
		}
		r = ts.must(404, "GET", "/v2/topics/nope", std(), "")
		if !strings.Contains(r.body, "Topic nope does not exist for project p1") {
			t.Errorf("absent topic: %s", r.body)
		}
		ts.must(400, "PUT", "/v2/topics/t1", std(), `{"_default_message_ttl":"x"}`)
		if r := ts.do("PUT", "/v2/topics/bad%20name", std(), ""); r.status != 400 || !strings.Contains(r.body, "Invalid topic identification") {
			t.Errorf("bad topic name: %d %s", r.status, r.body)
		}

		r = ts.must(200, "GET", "/v2/topics?limit=1", std(), "")
		if r.body != `{"topics":[{"name":"t1","href":"/v2/topics/t1"}],"links":[{"rel":"next","href":"/v2/topics?limit=1&marker=t1"}]}` {
			t.Errorf("topic listing %s", r.body)
		}
		r = ts.must(200, "GET", "/v2/topics?marker=t1&detailed=true", std(), "")
		if !strings.Contains(r.body, `{"name":"t2","href":"/v2/topics/t2","metadata":{"_max_messages_post_size":262144,"_default_message_ttl":3600,"_default_message_delay":0}}`) {
			t.Errorf("detailed topic listing %s", r.body)
		}
		if r := ts.must(200, "GET", "/v2/queues", std(), ""); strings.Contains(r.body, "t2") || !strings.Contains(r.body, `"name":"t1"`) {
			t.Errorf("queue listing shows topics or misses the queue: %s", r.body)
		}
		if r := ts.must(200, "GET", "/v2/topics", std("X-Project-ID", "p2"), ""); strings.Contains(r.body, "t1") {
			t.Errorf("project p2 lists p1's topics: %s", r.body)
		}

		r = ts.must(200, "PATCH", "/v2/topics/t1", patch, `[{"op":"replace","path":"/metadata/color","value":"green"},{"op":"remove","path":"/metadata/_default_message_ttl"}]`)
		if r.body != `{"color":"green","_max_messages_post_size":262144,"_default_message_ttl":3600,"_default_message_delay":0}` {
			t.Errorf("patched topic %s", r.body)
		}
		// _max_claim_count is reserved for queues, not for topics.
		ts.must(409, "PATCH", "/v2/topics/t1", patch, `[{"op":"replace","path":"/metadata/_max_claim_count","value":1}]`)
		ts.must(404, "PATCH", "/v2/topics/nope", patch, `[{"op":"add","path":"/metadata/a","value":1}]`)
		if r := ts.must(200, "GET", "/v2/queues/t1", std(), ""); !strings.Contains(r.body, `"color":"blue"`) {
			t.Errorf("topic patch reached the queue: %s", r.body)
		}

		r = ts.must(201, "POST", "/v2/topics/t1/messages", std(), `{"messages":[{"ttl":300,"body":{"event":"a"}},{"body":2}]}`)
		var posted struct{ Resources []string }
		_ = json.Unmarshal([]byte(r.body), &posted)
		if len(posted.Resources) != 2 || !strings.HasPrefix(posted.Resources[0], "/v2/topics/t1/messages/") ||
			!strings.HasPrefix(r.header.Get("Location"), "/v2/topics/t1/messages?ids=") {
			t.Fatalf("topic post: %s %v", r.body, r.header)
		}
		id := strings.TrimPrefix(posted.Resources[0], "/v2/topics/t1/messages/")
		r = ts.must(200, "GET", "/v2/topics/t1/messages/"+id, std(), "")
		if m := r.json(t); m["href"] != posted.Resources[0] || m["ttl"] != float64(300) {
			t.Errorf("topic message %s", r.body)
		}
		ts.must(404, "GET", "/v2/queues/t1/messages/"+id, std(), "")
		r = ts.must(200, "GET", "/v2/topics/t1/messages?echo=true", std(), "")
		if !strings.Contains(r.body, `"href":"/v2/topics/t1/messages/`+id+`"`) || !strings.Contains(r.body, `"href":"/v2/topics/t1/messages?echo=true`) {
			t.Errorf("topic message listing %s", r.body)
		}
		r = ts.must(200, "GET", "/v2/topics/t1/stats", std(), "")
		if !strings.Contains(r.body, `"total":2`) || !strings.Contains(r.body, `"href":"/v2/topics/t1/messages/`) {
			t.Errorf("topic stats %s", r.body)
		}
		if r := ts.must(200, "GET", "/v2/queues/t1/stats", std(), ""); !strings.Contains(r.body, `"total":0`) {
			t.Errorf("queue stats count the topic's messages: %s", r.body)
		}
		ts.must(200, "GET", "/v2/topics/never/stats", std(), "")
		ts.must(204, "DELETE", "/v2/topics/t1/messages/"+id, std(), "")
		ts.must(404, "GET", "/v2/topics/t1/messages/"+id, std(), "")
		// Topics take no claims: the route does not exist.
		ts.must(404, "POST", "/v2/topics/t1/claims", std(), `{"ttl":60,"grace":60}`)
		ts.must(204, "POST", "/v2/topics/t1/purge", std(), `{"resource_types":["messages"]}`)
		if r := ts.must(200, "GET", "/v2/topics/t1/stats", std(), ""); !strings.Contains(r.body, `"total":0`) {
			t.Errorf("stats after purge %s", r.body)
		}

		ts.must(204, "DELETE", "/v2/topics/t1", std(), "")
		ts.must(404, "GET", "/v2/topics/t1", std(), "")
		ts.must(200, "GET", "/v2/queues/t1", std(), "")
		ts.must(204, "DELETE", "/v2/topics/t2", std(), "")
		ts.must(204, "DELETE", "/v2/queues/t1", std(), "")
		if r := ts.must(200, "GET", "/v2/topics", std(), ""); r.body != `{"topics":[],"links":[]}` {
			t.Errorf("listing after deletes %s", r.body)
		}
	})
}

// TestHomeAdvertisesShareAndTopics: the resources added to Zaqar's home
// document (TestVersionsAndHome checks every advertised one is served).
func TestHomeAdvertisesShareAndTopics(t *testing.T) {
	var doc struct {
		Resources map[string]json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(homeDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"rel/queue_share", "rel/topics", "rel/topic", "rel/topic_stats", "rel/topic_purge",
		"rel/topic_messages", "rel/topic_message", "rel/topic_subscriptions", "rel/topic_subscription"} {
		if _, ok := doc.Resources[rel]; !ok {
			t.Errorf("home lacks %s", rel)
		}
	}
}

// TestTopicSubscriptions: a topic's subscriptions are its own (not those of
// a queue of the same name), and a post to the topic records a delivery
// for each of them.
func TestTopicSubscriptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, store func(*config.Options)) {
		ts := startServer(t, store)
		const hook = `{"subscriber":"http://127.0.0.1:8899/topic","ttl":3600,"options":{"k":"v"}}`
		r := ts.must(201, "POST", "/v2/topics/t1/subscriptions", std(), hook)
		if r.header.Get("Location") != "/v2/topics/t1/subscriptions" {
			t.Errorf("Location %q", r.header.Get("Location"))
		}
		id := r.json(t)["subscription_id"].(string)
		if again := ts.must(201, "POST", "/v2/topics/t1/subscriptions", std(), hook).json(t); again["subscription_id"] != id {
			t.Errorf("same subscriber, new id: %v", again)
		}
		got := ts.must(200, "GET", "/v2/topics/t1/subscriptions/"+id, std(), "").json(t)
		if got["source"] != "t1" || got["subscriber"] != "http://127.0.0.1:8899/topic" {
			t.Errorf("topic subscription %v", got)
		}
		if r := ts.must(200, "GET", "/v2/queues/t1/subscriptions", std(), ""); r.body != `{"subscriptions":[],"links":[]}` {
			t.Errorf("the queue t1 sees the topic's subscriptions: %s", r.body)
		}
		ts.must(404, "GET", "/v2/queues/t1/subscriptions/"+id, std(), "")
		r = ts.must(200, "GET", "/v2/topics/t1/subscriptions", std(), "")
		if !strings.Contains(r.body, `"href":"/v2/topics/t1/subscriptions?marker=`+id+`"`) {
			t.Errorf("topic subscription listing %s", r.body)
		}
		ts.must(204, "PATCH", "/v2/topics/t1/subscriptions/"+id, std(), `{"ttl":7200}`)
		ts.must(204, "PUT", "/v2/topics/t1/subscriptions/"+id+"/confirm", std(), `{"confirmed":true}`)

		ts.must(201, "POST", "/v2/topics/t1/messages", std(), `{"messages":[{"ttl":300,"body":{"event":"a"}}]}`)
		ts.must(201, "POST", "/v2/queues/t1/messages", std(), `{"messages":[{"ttl":300,"body":1}]}`)
		if d := ts.must(200, "GET", "/v2/topics/t1/deliveries", std(), "").json(t); d["pending"] != 1.0 {
			t.Errorf("topic deliveries %v, want 1 pending", d)
		}
		if d := ts.must(200, "GET", "/v2/queues/t1/deliveries", std(), "").json(t); d["pending"] != 0.0 {
			t.Errorf("queue t1 deliveries %v: the topic's subscriber was given the queue's message", d)
		}
		ts.must(204, "POST", "/v2/topics/t1/purge", std(), `{"resource_types":["subscriptions"]}`)
		if r := ts.must(200, "GET", "/v2/topics/t1/subscriptions", std(), ""); r.body != `{"subscriptions":[],"links":[]}` {
			t.Errorf("after purge %s", r.body)
		}
		ts.must(204, "DELETE", "/v2/topics/t1", std(), "")
		ts.must(204, "DELETE", "/v2/queues/t1", std(), "")
	})
}

// TestTopicNamespaceUnreachable: a project id holding the namespace
// separator (which net/http never lets into a header, but a test request
// can carry) is refused, so no caller can address another project's topics
// as its queues.
func TestTopicNamespaceUnreachable(t *testing.T) {
	s := newTestServer(t, nil)
	for _, project := range []string{"p1\x1etopics", "\x1e"} {
		req := httptest.NewRequest("GET", "/v2/queues", nil)
		req.Header.Set("Client-ID", testClient)
		req.Header["X-Project-Id"] = []string{project}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != 400 {
			t.Errorf("project %q: %d %s", project, rec.Code, rec.Body)
		}
	}
}
