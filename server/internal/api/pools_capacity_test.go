package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/testutil"
)

// TestFullPoolAnswers507: a pool whose Redis is at its maxmemory (with
// noeviction, as the operator runs every shard) refuses posts with 507,
// Retry-After and a body that says the storage is full; reads, claims,
// deletes and pops on it keep working, so consumers drain it; the other
// pool is untouched; its storage endpoint says it is full; new queues go
// to the pool with room; and posting resumes once messages are deleted.
func TestFullPoolAnswers507(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	ts := startReplica(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	small := testutil.StartRedis(t, testutil.RedisOptions{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"}})
	roomy := testutil.StartRedis(t, testutil.RedisOptions{})
	ts.must(201, "PUT", "/v2/pools/r0", adm, `{"weight":100,"uri":"`+small.URL+`"}`)
	ts.must(201, "PUT", "/v2/pools/r1", adm, `{"weight":100,"uri":"`+roomy.URL+`"}`)
	poolOf := placedOn(t, mgmt.URL)
	onPool := queueOnEach(t, ts, mgmt.URL, "fq", "r0", "r1")
	full, other := onPool["r0"], onPool["r1"]
	batch := `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"ttl":3600,"body":"`+strings.Repeat("x", 1000)+`"},`, 10), ",") + `]}`
	var refused resp
	posted := 0
	for i := 0; i < 2000; i++ {
		r := ts.do("POST", "/v2/queues/"+full+"/messages", std(), batch)
		if r.status != 201 {
			refused = r
			break
		}
		posted += 10
	}
	if refused.status != 507 || refused.header.Get("Retry-After") == "" ||
		!strings.Contains(refused.body, `"title":"Insufficient storage"`) || !strings.Contains(refused.body, "storage is full") {
		t.Fatalf("post to the full pool: %d %v %s", refused.status, refused.header, refused.body)
	}
	// Nothing of the refused batch was stored.
	stats := ts.must(200, "GET", "/v2/queues/"+full+"/stats", std(), "").json(t)
	if n := stats["messages"].(map[string]any)["total"].(float64); int(n) != posted {
		t.Fatalf("stats of the full queue: %v messages, %d acknowledged", n, posted)
	}
	storageOf := func(pool string) map[string]any {
		return ts.must(200, "GET", "/v2/pools/"+pool+"/storage", adm, "").json(t)
	}
	if s := storageOf("r0"); s["full"] != true || s["max_bytes"].(float64) != 4<<20 || s["eviction_policy"] != "noeviction" {
		t.Errorf("storage of the full pool: %v", s)
	}
	if s := storageOf("r1"); s["full"] != false || s["max_bytes"].(float64) != 0 || s["used_bytes"].(float64) <= 0 {
		t.Errorf("storage of the other pool: %v", s)
	}
	ts.must(404, "GET", "/v2/pools/nope/storage", adm, "")
	ts.must(403, "GET", "/v2/pools/r0/storage", std(), "")
	// Consumers drain the full queue; the other pool's queue posts on.
	ts.must(200, "GET", "/v2/queues/"+full+"/messages?echo=true&limit=5", std(), "")
	ts.must(201, "POST", "/v2/queues/"+other+"/messages", std(), batch)
	// New queues go to the pool with room once the watcher has seen the
	// full one: it reads every pool every 5 s.
	time.Sleep(6 * time.Second)
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("placed%02d", i)
		ts.must(201, "PUT", "/v2/queues/"+name, std(), "")
		if p := poolOf(name); p != "r1" {
			t.Fatalf("new queue %s placed on the full pool %s", name, p)
		}
	}
	for drained := 0; drained < posted; {
		c := ts.do("POST", "/v2/queues/"+full+"/claims?limit=10", std(), `{"ttl":60,"grace":60}`)
		if c.status != 201 {
			t.Fatalf("claim on the full pool: %d %s", c.status, c.body)
		}
		for _, m := range c.json(t)["messages"].([]any) {
			ts.must(204, "DELETE", m.(map[string]any)["href"].(string), std(), "")
			drained++
		}
		popped := ts.must(200, "DELETE", "/v2/queues/"+full+"/messages?pop=5", std(), "").json(t)
		drained += len(popped["messages"].([]any))
		if drained < 50 {
			continue
		}
		if r := ts.do("POST", "/v2/queues/"+full+"/messages", std(), `{"messages":[{"body":1}]}`); r.status == 201 {
			return
		} else if r.status != 507 {
			t.Fatalf("post after draining %d: %d %s", drained, r.status, r.body)
		}
	}
	t.Fatal("posting did not resume after the queue was drained")
}
