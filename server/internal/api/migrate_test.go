package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/testutil"
)

// TestMigrateAPI moves a queue between two Redis pools through the admin
// routes, with every refusal the contract names on the way.
func TestMigrateAPI(t *testing.T) {
	// Without a catalog the routes do not exist, as /v2/pools.
	plain := startServer(t, nil)
	plain.must(404, "POST", "/v2/queues/q/migrate", std("X-Roles", "admin"), `{"pool":"p2"}`)
	plain.must(404, "GET", "/v2/queues/q/migrate", std("X-Roles", "admin"), "")

	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	r1 := testutil.StartRedis(t, testutil.RedisOptions{})
	r2 := testutil.StartRedis(t, testutil.RedisOptions{})
	ts := startPooledServer(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	ts.must(201, "PUT", "/v2/pools/p1", adm, `{"weight":100,"uri":"`+r1.URL+`"}`)
	ts.must(201, "PUT", "/v2/pools/p2", adm, `{"weight":0,"uri":"`+r2.URL+`"}`)
	ts.must(201, "PUT", "/v2/pools/p3?force=true", adm, `{"weight":0,"uri":"redis://127.0.0.1:1/0"}`)

	ts.must(403, "POST", "/v2/queues/work/migrate", std(), `{"pool":"p2"}`)
	ts.must(404, "POST", "/v2/queues/work/migrate", adm, `{"pool":"p2"}`)
	ts.must(201, "PUT", "/v2/queues/work", std(), `{"note":"kept"}`)
	var msgs []string
	for i := 0; i < 25; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"ttl":3600,"body":{"n":%d}}`, i))
	}
	ts.must(201, "POST", "/v2/queues/work/messages", std(), `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	for _, bad := range []struct{ body, want string }{
		{``, "Missing request body"},
		{`{}`, "'pool' is required"},
		{`{"pool":""}`, "'pool' is required"},
		{`{"pool":7}`, "'pool' must be of type string"},
		{`{"pool":"p2","x":1}`, `Unknown field \"x\"; a move takes pool.`},
		{`{"pool":"nope"}`, "pool nope is not registered"},
		{`{"pool":"p1"}`, "already on pool p1"},
		{`{"pool":"../x"}`, "is not valid"},
	} {
		r := ts.do("POST", "/v2/queues/work/migrate", adm, bad.body)
		if r.status != 400 || !strings.Contains(r.body, bad.want) || !strings.Contains(r.body, `"title"`) {
			t.Errorf("POST migrate %q: %d %s, want 400 mentioning %q", bad.body, r.status, r.body, bad.want)
		}
	}
	ts.must(404, "GET", "/v2/queues/work/migrate", adm, "")

	r := ts.must(202, "POST", "/v2/queues/work/migrate", adm, `{"pool":"p2"}`)
	if r.header.Get("Location") != "/v2/queues/work/migrate" {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	started := r.json(t)
	if started["from"] != "p1" || started["to"] != "p2" || started["state"] != "sealing" || started["finished"] != nil {
		t.Errorf("202 body %s", r.body)
	}
	// The record waits a catalog poll before sealing: the same move again
	// is the same move; another target conflicts.
	ts.must(202, "POST", "/v2/queues/work/migrate", adm, `{"pool":"p2"}`)
	if r := ts.do("POST", "/v2/queues/work/migrate", adm, `{"pool":"p3"}`); r.status != 409 || !strings.Contains(r.body, "already moving to pool p2") {
		t.Errorf("another target during the move: %d %s", r.status, r.body)
	}
	var got map[string]any
	waitForState(t, func() bool {
		got = ts.must(200, "GET", "/v2/queues/work/migrate", adm, "").json(t)
		return got["state"] == "done"
	})
	if got["messages_moved"] != float64(25) || got["messages_remaining"] != float64(0) || got["finished"] == nil || got["error"] != nil || got["queue"] != "work" {
		t.Errorf("after the move: %v", got)
	}
	if _, err := time.Parse(time.RFC3339, got["started"].(string)); err != nil {
		t.Errorf("started %v: %v", got["started"], err)
	}
	// Everything is there, on p2.
	if b := ts.must(200, "GET", "/v2/queues/work/stats", std(), "").body; !strings.Contains(b, `"total":25`) {
		t.Errorf("stats after the move: %s", b)
	}
	if b := ts.must(200, "GET", "/v2/queues/work", std(), "").body; !strings.Contains(b, `"note":"kept"`) {
		t.Errorf("metadata after the move: %s", b)
	}
	if b := ts.must(200, "GET", "/v2/pools/p2/queues", adm, "").body; b != `{"links":[],"queues":[{"name":"work","project":"p1"}]}` {
		t.Errorf("queues on p2: %s", b)
	}
	if b := ts.must(200, "GET", "/v2/pools/p1/queues", adm, "").body; b != `{"links":[],"queues":[]}` {
		t.Errorf("queues on p1: %s", b)
	}
	ts.must(404, "GET", "/v2/pools/nope/queues", adm, "")
	ts.must(400, "GET", "/v2/pools/p2/queues?limit=0", adm, "")
	ts.must(400, "GET", "/v2/pools/p2/queues?marker=***", adm, "")

	// A target that cannot be reached is refused before anything is
	// recorded: the queue's posts would wait on it.
	if r := ts.do("POST", "/v2/queues/work/migrate", adm, `{"pool":"p3"}`); r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("moving to an unreachable pool: %d %s", r.status, r.body)
	}
	if got := ts.must(200, "GET", "/v2/queues/work/migrate", adm, "").json(t); got["to"] != "p2" || got["state"] != "done" {
		t.Errorf("a refused move changed the record: %v", got)
	}

	// A queue with a dead-letter queue takes it along (they share a pool).
	ts.must(201, "PUT", "/v2/queues/dl", std(), `{"_dead_letter_queue":"dl-dead","_max_claim_count":2}`)
	ts.must(202, "POST", "/v2/queues/dl/migrate", adm, `{"pool":"p2"}`)
	for _, q := range []string{"dl", "dl-dead"} {
		waitForState(t, func() bool {
			got = ts.must(200, "GET", "/v2/queues/"+q+"/migrate", adm, "").json(t)
			return got["state"] == "done"
		})
		if got["to"] != "p2" {
			t.Errorf("move of %s: %v", q, got)
		}
	}
	if b := ts.must(200, "GET", "/v2/pools/p2/queues", adm, "").body; !strings.Contains(b, `"name":"dl-dead"`) || !strings.Contains(b, `"name":"dl"`) {
		t.Errorf("queues on p2 after moving dl: %s", b)
	}
}

// TestPoolQueuesPages pages GET /v2/pools/{name}/queues through next links.
func TestPoolQueuesPages(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	r1 := testutil.StartRedis(t, testutil.RedisOptions{})
	ts := startPooledServer(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	ts.must(201, "PUT", "/v2/pools/p1", adm, `{"weight":100,"uri":"`+r1.URL+`"}`)
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("q%d", i)
		ts.must(201, "PUT", "/v2/queues/"+name, std("X-Project-ID", fmt.Sprintf("proj%d", i%2)), `{}`)
		want[fmt.Sprintf("proj%d/%s", i%2, name)] = true
	}
	next, pages := "/v2/pools/p1/queues?limit=3", 0
	for next != "" && pages < 10 {
		pages++
		var page struct {
			Queues []struct{ Project, Name string }
			Links  []struct{ Href string }
		}
		if err := json.Unmarshal([]byte(ts.must(200, "GET", next, adm, "").body), &page); err != nil {
			t.Fatal(err)
		}
		for _, q := range page.Queues {
			k := q.Project + "/" + q.Name
			if !want[k] {
				t.Errorf("page %d lists %s twice or unexpectedly", pages, k)
			}
			delete(want, k)
		}
		next = ""
		if len(page.Links) > 0 {
			next = page.Links[0].Href
		}
	}
	if len(want) != 0 || pages != 3 {
		t.Errorf("after %d pages, not listed: %v", pages, want)
	}
}

func waitForState(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("the move did not finish within 20 s")
}
