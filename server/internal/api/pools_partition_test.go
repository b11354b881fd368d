package api

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/testutil"
)

// linkTimeout is the storage timeout of the servers linkedPools starts.
const linkTimeout = 500 * time.Millisecond

// linkedPools serves a pooled server with a storage timeout of linkTimeout
// over two Redis pools: r0 behind a Link, r1 direct; it returns a queue
// placed on each.
func linkedPools(t *testing.T, prefix string) (ts *testServer, link *testutil.Link, farQ, nearQ string) {
	t.Helper()
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	ts = startReplicaWith(t, mgmt.URL, func(o *config.Options) { o.StorageTimeout = linkTimeout })
	adm := std("X-Roles", "admin")
	far := testutil.StartRedis(t, testutil.RedisOptions{})
	link = testutil.StartLink(t, far.Addr)
	near := testutil.StartRedis(t, testutil.RedisOptions{})
	ts.must(201, "PUT", "/v2/pools/r0", adm, `{"weight":100,"uri":"redis://`+link.Addr+`/0"}`)
	ts.must(201, "PUT", "/v2/pools/r1", adm, `{"weight":100,"uri":"`+near.URL+`"}`)
	on := queueOnEach(t, ts, mgmt.URL, prefix, "r0", "r1")
	return ts, link, on["r0"], on["r1"]
}

// TestPartitionedPoolIsBounded: one of two pools is cut off the way a
// network partition cuts it (bytes stop, nothing is refused) while
// producers post to a queue on each, concurrently. The cut pool's queue
// answers 503 with Retry-After, each answer within a bound of the storage
// timeout (no request hangs); the other pool's queue keeps answering 201
// throughout; health names the cut pool; once the link heals the cut
// queue is served again, health says so, and nothing acknowledged is
// lost on either.
func TestPartitionedPoolIsBounded(t *testing.T) {
	ts, link, cutQ, liveQ := linkedPools(t, "pq")
	adm := std("X-Roles", "admin")

	// Producers on both queues, 4 each, for the whole test: before, during
	// and after the cut (bounded by count and by stop).
	var stop atomic.Bool
	var mu sync.Mutex
	acked := map[string]int{}
	var other []string           // answers neither 201 nor the cut queue's 503
	var slowest [2]time.Duration // per queue, of the requests sent while cut
	var cutAnswers, cut503 int
	var cutting atomic.Bool
	var wg sync.WaitGroup
	for i, q := range []string{cutQ, liveQ} {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 20000 && !stop.Load(); n++ {
					time.Sleep(2 * time.Millisecond)
					during := cutting.Load()
					start := time.Now()
					r := ts.do("POST", "/v2/queues/"+q+"/messages", std(), `{"messages":[{"body":1}]}`)
					took := time.Since(start)
					mu.Lock()
					switch {
					case r.status == 201:
						acked[q]++
					case q == cutQ && r.status == 503 && r.header.Get("Retry-After") != "":
						cut503++
					default:
						other = append(other, fmt.Sprintf("%s: %d %s", q, r.status, r.body))
					}
					if during {
						if took > slowest[i] {
							slowest[i] = took
						}
						if q == cutQ {
							cutAnswers++
						}
					}
					mu.Unlock()
				}
			}()
		}
	}
	reachable := func() (r0, r1 any) {
		h := ts.must(200, "GET", "/v2/health", adm, "").json(t)
		return h["r0"].(map[string]any)["storage_reachable"], h["r1"].(map[string]any)["storage_reachable"]
	}
	time.Sleep(300 * time.Millisecond)
	link.Cut()
	cutting.Store(true)
	time.Sleep(time.Second)
	// Health names the cut pool, and only it.
	if r0, r1 := reachable(); r0 != false || r1 != true {
		t.Errorf("health while r0 is cut: r0 reachable %v, r1 %v", r0, r1)
	}
	time.Sleep(2 * time.Second)
	cutting.Store(false)
	link.Heal()
	// Served again: the cut queue takes a post within a few timeouts.
	healed := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r := ts.do("POST", "/v2/queues/"+cutQ+"/messages", std(), `{"messages":[{"body":1}]}`); r.status == 201 {
			mu.Lock()
			acked[cutQ]++
			mu.Unlock()
			healed = true
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("while cut: %d answers on the cut queue (%d 503 overall), slowest %v; slowest on the other %v; acked %v",
		cutAnswers, cut503, slowest[0], slowest[1], acked)
	if len(other) > 0 {
		t.Fatalf("%d unexpected answers, first: %s", len(other), other[0])
	}
	if !healed {
		t.Fatal("the cut queue was not served again within 10 s of the link healing")
	}
	if r0, r1 := reachable(); r0 != true || r1 != true {
		t.Errorf("health after healing: r0 reachable %v, r1 %v", r0, r1)
	}
	if cut503 == 0 {
		t.Fatal("the cut queue never answered 503 while its pool was cut off")
	}
	// No request waits much past the storage timeout (a hang would sit
	// here until the test's own deadline).
	if slowest[0] > 4*linkTimeout {
		t.Errorf("a request to the cut pool took %v; the storage linkTimeout is %v", slowest[0], linkTimeout)
	}
	// Nothing acknowledged was lost, on either pool.
	for _, q := range []string{cutQ, liveQ} {
		stats := ts.must(200, "GET", "/v2/queues/"+q+"/stats", std(), "").json(t)
		if n := int(stats["messages"].(map[string]any)["total"].(float64)); n < acked[q] {
			t.Errorf("%s holds %d messages, %d acknowledged", q, n, acked[q])
		}
	}
}

// TestSlowPoolIsBounded: a pool behind a slow link answers late but
// answers (201) while its delay fits the storage timeout, and 503 with
// Retry-After, within a bound of the timeout, once it does not; the other
// pool's queue is served throughout; healed, the slow queue is served
// again and holds every message it acknowledged.
func TestSlowPoolIsBounded(t *testing.T) {
	ts, link, slowQ, fastQ := linkedPools(t, "sq")
	post := func(q string) (resp, time.Duration) {
		start := time.Now()
		r := ts.do("POST", "/v2/queues/"+q+"/messages", std(), `{"messages":[{"body":1}]}`)
		return r, time.Since(start)
	}
	acked := 0
	for _, delay := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond} {
		link.Delay(delay)
		var slowest time.Duration
		for i := 0; i < 10; i++ {
			r, took := post(slowQ)
			if r.status != 201 {
				t.Fatalf("post over a %v link: %d %s", delay, r.status, r.body)
			}
			acked++
			slowest = max(slowest, took)
			if r, _ := post(fastQ); r.status != 201 {
				t.Fatalf("post to the other pool while r0 is slow: %d %s", r.status, r.body)
			}
		}
		t.Logf("link delay %v: slowest post %v", delay, slowest)
	}
	link.Delay(2 * linkTimeout)
	for i := 0; i < 3; i++ {
		r, took := post(slowQ)
		if r.status != 503 || r.header.Get("Retry-After") == "" {
			t.Fatalf("post over a link slower than the storage linkTimeout: %d %v %s", r.status, r.header, r.body)
		}
		if took > 4*linkTimeout {
			t.Errorf("a post over a link slower than the linkTimeout took %v; the linkTimeout is %v", took, linkTimeout)
		}
		if r, _ := post(fastQ); r.status != 201 {
			t.Fatalf("post to the other pool while r0 is too slow: %d %s", r.status, r.body)
		}
	}
	link.Heal()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, _ := post(slowQ); r.status == 201 {
			acked++
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow queue was not served again within 10 s of the link healing")
		}
	}
	stats := ts.must(200, "GET", "/v2/queues/"+slowQ+"/stats", std(), "").json(t)
	if n := int(stats["messages"].(map[string]any)["total"].(float64)); n < acked {
		t.Errorf("%s holds %d messages, %d acknowledged", slowQ, n, acked)
	}
}
