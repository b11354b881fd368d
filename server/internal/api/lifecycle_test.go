package api

import (
	"encoding/json"
	"net/url"
	"sluice.dev/server/internal/config"
	"strings"
	"testing"
)

const otherClient = "5a1f1b2c00004000800000000000beef" // undashed, as zaqarclient sends

func TestQueueLifecycle(t *testing.T) { forEachStore(t, testQueueLifecycle) }

func testQueueLifecycle(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(204, "DELETE", "/v2/queues/demo", std(), "")
	r := ts.must(201, "PUT", "/v2/queues/demo", std("Content-Type", "application/json"), `{"description":"anchor demo queue","_default_message_ttl":3600}`)
	if r.header.Get("Location") != "/v2/queues/demo" {
		t.Errorf("location %q", r.header.Get("Location"))
	}
	r = ts.must(204, "PUT", "/v2/queues/demo", std(), `{"description":"ignored"}`)
	if r.header.Get("Location") != "/v2/queues/demo" {
		t.Errorf("location on 204 %q", r.header.Get("Location"))
	}
	ts.must(201, "PUT", "/v2/queues/demo2", std(), "")
	meta := ts.must(200, "GET", "/v2/queues/demo", std(), "").json(t)
	want := map[string]any{"description": "anchor demo queue", "_max_messages_post_size": 262144.0, "_default_message_ttl": 3600.0,
		"_default_message_delay": 0.0, "_dead_letter_queue": nil, "_dead_letter_queue_messages_ttl": nil, "_max_claim_count": nil,
		"_enable_encrypt_messages": false}
	assertJSON(t, meta, want)
	// Never-created queues answer with the defaults (queues are lazy).
	meta = ts.must(200, "GET", "/v2/queues/never-created", std(), "").json(t)
	delete(want, "description")
	assertJSON(t, meta, want)

	meta = ts.must(200, "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType),
		`[{"op":"replace","path":"/metadata/description","value":"patched"},{"op":"add","path":"/metadata/extra","value":1},{"op":"replace","path":"/metadata/_default_message_ttl","value":120}]`).json(t)
	if meta["description"] != "patched" || meta["extra"] != 1.0 || meta["_default_message_ttl"] != 120.0 {
		t.Errorf("patched metadata %v", meta)
	}
	// The new default TTL applies at once to posts through this server.
	ts.must(201, "POST", "/v2/queues/demo/messages", std(), `{"messages":[{"body":1}]}`)
	list := ts.must(200, "GET", "/v2/queues/demo/messages?echo=true", std(), "").json(t)
	if ttl := list["messages"].([]any)[0].(map[string]any)["ttl"]; ttl != 120.0 {
		t.Errorf("ttl %v, want the queue default 120", ttl)
	}
	meta = ts.must(200, "PATCH", "/v2/queues/demo", std("Content-Type", patchMediaType), `[{"op":"remove","path":"/metadata/extra"}]`).json(t)
	if _, ok := meta["extra"]; ok {
		t.Errorf("extra not removed: %v", meta)
	}

	// Listing: paging by the next link, detailed, name filter and count.
	ts.must(201, "PUT", "/v2/queues/other", std(), "")
	page := ts.must(200, "GET", "/v2/queues?limit=2", std(), "").json(t)
	names := queueNames(page)
	if strings.Join(names, ",") != "demo,demo2" {
		t.Fatalf("page 1 %v", names)
	}
	next := nextHref(t, page)
	if next != "/v2/queues?limit=2&marker=demo2" {
		t.Errorf("next %q", next)
	}
	page = ts.must(200, "GET", next, std(), "").json(t)
	if strings.Join(queueNames(page), ",") != "other" {
		t.Errorf("page 2 %v", queueNames(page))
	}
	page = ts.must(200, "GET", "/v2/queues?detailed=true&name=demo2&with_count=true", std(), "").json(t)
	qs := page["queues"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["metadata"] == nil || page["count"] != 1.0 {
		t.Errorf("filtered detailed listing %v", page)
	}
	page = ts.must(200, "GET", "/v2/queues?marker=zzz", std(), "").json(t)
	if len(page["queues"].([]any)) != 0 || len(page["links"].([]any)) != 0 {
		t.Errorf("empty page %v", page)
	}

	ts.must(204, "POST", "/v2/queues/demo/purge", std(), `{"resource_types":["messages"]}`)
	if b := ts.must(200, "GET", "/v2/queues/demo/stats", std(), "").body; b != `{"messages":{"claimed":0,"free":0,"total":0}}` {
		t.Errorf("stats after purge %s", b)
	}
	ts.must(204, "DELETE", "/v2/queues/demo", std(), "")
	ts.must(204, "DELETE", "/v2/queues/demo", std(), "")
	if strings.Contains(ts.must(200, "GET", "/v2/queues", std(), "").body, `"demo"`) {
		t.Error("deleted queue still listed")
	}
}

func assertJSON(t *testing.T, got, want map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("got  %s\nwant %s", g, w)
	}
}

func queueNames(page map[string]any) []string {
	var out []string
	for _, q := range page["queues"].([]any) {
		out = append(out, q.(map[string]any)["name"].(string))
	}
	return out
}

func nextHref(t *testing.T, page map[string]any) string {
	t.Helper()
	links, _ := page["links"].([]any)
	if len(links) != 1 {
		t.Fatalf("links %v", page["links"])
	}
	l := links[0].(map[string]any)
	if l["rel"] != "next" {
		t.Fatalf("link %v", l)
	}
	return l["href"].(string)
}

func TestMessagesLifecycle(t *testing.T) { forEachStore(t, testMessagesLifecycle) }

func testMessagesLifecycle(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	r := ts.must(201, "POST", "/v2/queues/demo/messages", std("Content-Type", "text/plain"),
		`{"messages":[{"ttl":300,"body":{"event":"BackupStarted","n":1}},{"ttl":60,"body":"plain string body"},{"body":[1,2,3]},{"ttl":120,"delay":0,"body":{"event":"n4"}},{"ttl":120,"body":null}]}`)
	res := r.json(t)["resources"].([]any)
	if len(res) != 5 {
		t.Fatalf("resources %v", res)
	}
	ids := make([]string, len(res))
	for i, h := range res {
		href := h.(string)
		ids[i] = strings.TrimPrefix(href, "/v2/queues/demo/messages/")
		if ids[i] == href || ids[i] == "" {
			t.Fatalf("href %q", href)
		}
	}
	if loc := r.header.Get("Location"); loc != "/v2/queues/demo/messages?ids="+strings.Join(ids, ",") {
		t.Errorf("location %q", loc)
	}

	// echo=false (default) hides the poster's own messages.
	if b := ts.must(200, "GET", "/v2/queues/demo/messages", std(), "").body; b != `{"messages":[],"links":[]}` {
		t.Errorf("own messages listed: %s", b)
	}
	other := std("Client-ID", otherClient)
	all := ts.must(200, "GET", "/v2/queues/demo/messages", other, "").json(t)
	msgs := all["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("other client sees %d messages", len(msgs))
	}
	m0 := msgs[0].(map[string]any)
	if m0["id"] != ids[0] || m0["href"] != "/v2/queues/demo/messages/"+ids[0] || m0["ttl"] != 300.0 || m0["age"] != 0.0 {
		t.Errorf("first message %v", m0)
	}
	if b, _ := json.Marshal(m0["body"]); string(b) != `{"event":"BackupStarted","n":1}` {
		t.Errorf("body %s", b)
	}
	if msgs[2].(map[string]any)["ttl"] != 3600.0 {
		t.Errorf("default ttl %v", msgs[2])
	}

	// Paging with limit=2 follows next links through all five.
	var seen []string
	path := "/v2/queues/demo/messages?echo=true&limit=2"
	for i := 0; i < 5 && path != ""; i++ {
		page := ts.must(200, "GET", path, std(), "").json(t)
		pm := page["messages"].([]any)
		if len(pm) == 0 {
			break
		}
		for _, m := range pm {
			seen = append(seen, m.(map[string]any)["id"].(string))
		}
		path = nextHref(t, page)
		u, _ := url.Parse(path)
		if u.Query().Get("limit") != "2" || u.Query().Get("echo") != "true" || u.Query().Get("marker") == "" {
			t.Errorf("next link lost parameters: %s", path)
		}
	}
	if strings.Join(seen, ",") != strings.Join(ids, ",") {
		t.Errorf("paged %v, want %v", seen, ids)
	}
	// Every non-empty page links onwards (zaqar-bench's observer resumes
	// from it); the page after the last message is empty, then new
	// messages show up there.
	end := ts.must(200, "GET", path, std(), "").body
	if end != `{"messages":[],"links":[]}` {
		t.Errorf("after the last page: %s", end)
	}
	ts.must(201, "POST", "/v2/queues/demo/messages", other, `{"messages":[{"body":"late"}]}`)
	late := ts.must(200, "GET", path, std(), "").json(t)
	if lm := late["messages"].([]any); len(lm) != 1 || lm[0].(map[string]any)["body"] != "late" {
		t.Errorf("resuming from the last link: %v", late)
	}
	nextHref(t, late)
	lateHref := late["messages"].([]any)[0].(map[string]any)["href"].(string)
	ts.must(204, "DELETE", lateHref, std(), "")

	one := ts.must(200, "GET", "/v2/queues/demo/messages/"+ids[1], std(), "").json(t)
	if one["body"] != "plain string body" || one["ttl"] != 60.0 {
		t.Errorf("get by id %v", one)
	}
	bulk := ts.must(200, "GET", "/v2/queues/demo/messages?ids="+ids[0]+",5c6939a8ef2f8e4a1c4a1a1a,"+ids[1], std(), "").json(t)
	if n := len(bulk["messages"].([]any)); n != 2 {
		t.Errorf("bulk get returned %d", n)
	}
	// python-zaqarclient repeats the parameter instead.
	bulk = ts.must(200, "GET", "/v2/queues/demo/messages?ids="+ids[0]+"&ids="+ids[1]+"&ids="+ids[2], std(), "").json(t)
	if n := len(bulk["messages"].([]any)); n != 3 {
		t.Errorf("bulk get with repeated ids returned %d", n)
	}

	// Claim two; deleting a claimed message needs its claim.
	cr := ts.must(201, "POST", "/v2/queues/demo/claims?limit=2", std(), `{"ttl":300,"grace":60}`)
	claimLoc := cr.header.Get("Location")
	claimID := strings.TrimPrefix(claimLoc, "/v2/queues/demo/claims/")
	if claimID == claimLoc || claimID == "" {
		t.Fatalf("claim location %q", claimLoc)
	}
	claimed := cr.json(t)["messages"].([]any)
	c1 := claimed[1].(map[string]any)
	if c1["href"] != "/v2/queues/demo/messages/"+ids[1]+"?claim_id="+claimID || c1["ttl"] != 360.0 {
		t.Errorf("claimed message %v (ttl must rise to claim ttl+grace)", c1)
	}
	forb := ts.must(403, "DELETE", "/v2/queues/demo/messages/"+ids[0], std(), "").json(t)
	if forb["description"] != "This message is claimed; it cannot be deleted without a valid claim ID." {
		t.Errorf("403 body %v", forb)
	}
	wrong := ts.must(400, "DELETE", "/v2/queues/demo/messages/"+ids[0]+"?claim_id=51db7067821e727dc24df754", std(), "").json(t)
	if wrong["title"] != "Unable to delete" {
		t.Errorf("400 body %v", wrong)
	}
	ts.must(204, "DELETE", "/v2/queues/demo/messages/"+ids[0]+"?claim_id="+claimID, std(), "")
	ts.must(404, "GET", "/v2/queues/demo/messages/"+ids[0], std(), "")

	// include_claimed without a marker works (Zaqar answers 503 here).
	inc := ts.must(200, "GET", "/v2/queues/demo/messages?echo=true&include_claimed=true", std(), "").json(t)
	if n := len(inc["messages"].([]any)); n != 4 {
		t.Errorf("include_claimed lists %d, want 4", n)
	}
	st := ts.must(200, "GET", "/v2/queues/demo/stats", std(), "").json(t)["messages"].(map[string]any)
	if st["claimed"] != 1.0 || st["free"] != 3.0 || st["total"] != 4.0 {
		t.Errorf("stats %v", st)
	}
	oldest := st["oldest"].(map[string]any)
	if oldest["href"] != "/v2/queues/demo/messages/"+ids[1] || oldest["claim_id"] != claimID {
		t.Errorf("oldest %v", oldest)
	}

	// A claim id for a message no claim holds: Zaqar words it apart from
	// another claim's message, and takes an id that is no UUID for a claim
	// that does not exist, before it looks at the message.
	for _, tc := range []struct{ claim, desc string }{
		{claimID, "A claim was specified, but the message is not currently claimed."},
		{"not-a-uuid", "The specified claim does not exist or has expired."},
	} {
		got := ts.must(400, "DELETE", "/v2/queues/demo/messages/"+ids[3]+"?claim_id="+tc.claim, std(), "").json(t)
		if got["title"] != "Unable to delete" || got["description"] != tc.desc {
			t.Errorf("claim id %q on a free message: %v, want %q", tc.claim, got, tc.desc)
		}
	}
	ts.must(204, "DELETE", "/v2/queues/demo/messages?ids="+ids[3], std(), "")
	pop := ts.must(200, "DELETE", "/v2/queues/demo/messages?pop=5", std(), "").json(t)["messages"].([]any)
	if len(pop) != 2 {
		t.Fatalf("popped %d, want the 2 free ones", len(pop))
	}
	p0 := pop[0].(map[string]any)
	for _, k := range []string{"id", "age", "ttl", "body", "claim_id", "claim_count"} {
		if _, ok := p0[k]; !ok {
			t.Errorf("popped message lacks %q: %v", k, p0)
		}
	}
	if b := ts.must(200, "DELETE", "/v2/queues/demo/messages?pop=1", std(), "").body; b != `{"messages":[]}` {
		t.Errorf("pop with nothing free: %s", b)
	}
}

func TestClaimsLifecycle(t *testing.T) { forEachStore(t, testClaimsLifecycle) }

func testClaimsLifecycle(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(204, "POST", "/v2/queues/cq/claims", std(), "")
	ts.must(201, "POST", "/v2/queues/cq/messages", std(), `{"messages":[{"body":1},{"body":2},{"body":3}]}`)
	cr := ts.must(201, "POST", "/v2/queues/cq/claims", std(), "")
	id := strings.TrimPrefix(cr.header.Get("Location"), "/v2/queues/cq/claims/")
	if n := len(cr.json(t)["messages"].([]any)); n != 3 {
		t.Fatalf("claimed %d", n)
	}
	ts.must(204, "POST", "/v2/queues/cq/claims", std(), `{"ttl":60,"grace":60}`)
	got := ts.must(200, "GET", "/v2/queues/cq/claims/"+id, std(), "").json(t)
	if got["ttl"] != 300.0 || got["href"] != "/v2/queues/cq/claims/"+id || len(got["messages"].([]any)) != 3 {
		t.Errorf("claim %v", got)
	}
	ts.must(204, "PATCH", "/v2/queues/cq/claims/"+id, std(), `{"ttl":120,"grace":30}`)
	if got := ts.must(200, "GET", "/v2/queues/cq/claims/"+id, std(), "").json(t); got["ttl"] != 120.0 {
		t.Errorf("ttl after patch %v", got["ttl"])
	}
	ts.must(204, "DELETE", "/v2/queues/cq/claims/"+id, std(), "")
	ts.must(404, "GET", "/v2/queues/cq/claims/"+id, std(), "")
	ts.must(204, "DELETE", "/v2/queues/cq/claims/"+id, std(), "")
	// Released messages are claimable again.
	if n := len(ts.must(201, "POST", "/v2/queues/cq/claims?limit=2", std(), "").json(t)["messages"].([]any)); n != 2 {
		t.Errorf("re-claimed %d, want 2", n)
	}
}

func TestDeadLetterSettings(t *testing.T) { forEachStore(t, testDeadLetterSettings) }

func testDeadLetterSettings(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "PUT", "/v2/queues/work", std(), `{"_max_claim_count":1,"_dead_letter_queue":"dead","_dead_letter_queue_messages_ttl":600}`)
	ts.must(201, "POST", "/v2/queues/work/messages", std(), `{"messages":[{"body":"poison"}]}`)
	id := strings.TrimPrefix(ts.must(201, "POST", "/v2/queues/work/claims", std(), "").header.Get("Location"), "/v2/queues/work/claims/")
	ts.must(204, "DELETE", "/v2/queues/work/claims/"+id, std(), "")
	// The second claim finds the message over its claim count: it moves.
	ts.must(204, "POST", "/v2/queues/work/claims", std(), "")
	dead := ts.must(200, "GET", "/v2/queues/dead/messages?echo=true", std(), "").json(t)["messages"].([]any)
	if len(dead) != 1 || dead[0].(map[string]any)["body"] != "poison" || dead[0].(map[string]any)["ttl"] != 600.0 {
		t.Errorf("dead-letter queue holds %v", dead)
	}
}

func TestProjectIsolation(t *testing.T) { forEachStore(t, testProjectIsolation) }

func testProjectIsolation(t *testing.T, store func(*config.Options)) {
	ts := startServer(t, store)
	ts.must(201, "POST", "/v2/queues/shared/messages", std(), `{"messages":[{"body":"secret"}]}`)
	id := strings.TrimPrefix(ts.must(200, "GET", "/v2/queues/shared/messages?echo=true", std(), "").json(t)["messages"].([]any)[0].(map[string]any)["href"].(string), "/v2/queues/shared/messages/")
	p2 := std("X-Project-ID", "p2")
	if b := ts.must(200, "GET", "/v2/queues/shared/messages?echo=true", p2, "").body; b != `{"messages":[],"links":[]}` {
		t.Errorf("p2 lists p1's messages: %s", b)
	}
	ts.must(404, "GET", "/v2/queues/shared/messages/"+id, p2, "")
	ts.must(204, "DELETE", "/v2/queues/shared/messages/"+id, p2, "")
	ts.must(204, "DELETE", "/v2/queues/shared", p2, "")
	if strings.Contains(ts.must(200, "GET", "/v2/queues", p2, "").body, "shared") {
		t.Error("p2 lists p1's queue")
	}
	ts.must(200, "GET", "/v2/queues/shared/messages/"+id, std(), "")
}
