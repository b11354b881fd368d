package api

import (
	"fmt"
	"strings"
	"testing"

	"sluice.dev/server/internal/testutil"
)

// TestPoolDownAnswers503: with one of two Redis pools killed, its queues
// answer 503 with Retry-After, the other pool's queues keep working, and
// health names the dead pool.
func TestPoolDownAnswers503(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	ts := startReplica(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	pools := []*testutil.Redis{testutil.StartRedis(t, testutil.RedisOptions{}), testutil.StartRedis(t, testutil.RedisOptions{})}
	for i, r := range pools {
		ts.must(201, "PUT", fmt.Sprintf("/v2/pools/r%d", i), adm, `{"weight":100,"uri":"`+r.URL+`"}`)
	}
	onPool := queueOnEach(t, ts, mgmt.URL, "dq", "r0", "r1")
	for _, q := range onPool {
		ts.must(201, "POST", "/v2/queues/"+q+"/messages", std(), `{"messages":[{"body":1}]}`)
	}
	pools[0].Kill()
	dead, live := onPool["r0"], onPool["r1"]
	r := ts.do("POST", "/v2/queues/"+dead+"/messages", std(), `{"messages":[{"body":2}]}`)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "Service temporarily unavailable") {
		t.Errorf("post to a queue on the dead pool: %d %v %s", r.status, r.header, r.body)
	}
	ts.must(503, "GET", "/v2/queues/"+dead+"/stats", std(), "")
	ts.must(201, "POST", "/v2/queues/"+live+"/messages", std(), `{"messages":[{"body":2}]}`)
	ts.must(201, "POST", "/v2/queues/"+live+"/claims", std(), `{"ttl":60,"grace":60}`)
	h := ts.must(200, "GET", "/v2/health", adm, "").json(t)
	if r0 := h["r0"].(map[string]any); r0["storage_reachable"] != false {
		t.Errorf("health of the dead pool: %v", r0)
	}
	if r1 := h["r1"].(map[string]any); r1["storage_reachable"] != true {
		t.Errorf("health of the live pool: %v", r1)
	}
}
