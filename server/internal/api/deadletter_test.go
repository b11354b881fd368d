package api

import (
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
)

// TestClaimCountWithoutDeadLetterQueue: _max_claim_count alone is no policy
// (Zaqar acts only when _dead_letter_queue is set too), so claiming a
// message past the count must never delete it.
func TestClaimCountWithoutDeadLetterQueue(t *testing.T) {
	forEachStore(t, testClaimCountWithoutDeadLetterQueue)
}

func testClaimCountWithoutDeadLetterQueue(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "PUT", "/v2/queues/work", std(), `{"_max_claim_count":1}`)
	ts.must(201, "POST", "/v2/queues/work/messages", std(), `{"messages":[{"body":"keep me"}]}`)
	for round := 1; round <= 3; round++ {
		r := ts.must(201, "POST", "/v2/queues/work/claims", std(), "")
		id := strings.TrimPrefix(r.header.Get("Location"), "/v2/queues/work/claims/")
		ts.must(204, "DELETE", "/v2/queues/work/claims/"+id, std(), "")
	}
	got := ts.must(200, "GET", "/v2/queues/work/messages?echo=true", std(), "").json(t)["messages"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["body"] != "keep me" {
		t.Errorf("queue holds %v after claims past _max_claim_count, want the message kept", got)
	}
}

// TestDeadLetterIntoItself: a queue that is its own dead-letter queue
// accepts the setting (as Zaqar does) and moves an exhausted message to its
// own back with a fresh claim count and the dead-letter ttl.
func TestDeadLetterIntoItself(t *testing.T) { forEachStore(t, testDeadLetterIntoItself) }

func testDeadLetterIntoItself(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "PUT", "/v2/queues/loop", std(), `{"_max_claim_count":1,"_dead_letter_queue":"loop","_dead_letter_queue_messages_ttl":600}`)
	ts.must(201, "POST", "/v2/queues/loop/messages", std(), `{"messages":[{"body":"old","ttl":3600}]}`)
	r := ts.must(201, "POST", "/v2/queues/loop/claims", std(), "")
	ts.must(204, "DELETE", r.header.Get("Location"), std(), "")
	ts.must(201, "POST", "/v2/queues/loop/messages", std(), `{"messages":[{"body":"new","ttl":3600}]}`)
	claimed := ts.must(201, "POST", "/v2/queues/loop/claims", std(), "").json(t)["messages"].([]any)
	if len(claimed) != 1 || claimed[0].(map[string]any)["body"] != "new" {
		t.Fatalf("second claim took %v, want only the new message", claimed)
	}
	all := ts.must(200, "GET", "/v2/queues/loop/messages?echo=true&include_claimed=true", std(), "").json(t)["messages"].([]any)
	if len(all) != 2 || all[1].(map[string]any)["body"] != "old" || all[1].(map[string]any)["ttl"] != 600.0 {
		t.Errorf("queue after moving into itself: %v", all)
	}
}
