package api

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/testutil"
)

// startReplica serves a pooled server whose catalog client polls quickly;
// each replica has its own default (memory) store, as separate processes.
func startReplica(t *testing.T, catalogURI string) *testServer {
	t.Helper()
	return startReplicaWith(t, catalogURI, nil)
}

// startReplicaWith is startReplica with the options edited by edit.
func startReplicaWith(t *testing.T, catalogURI string, edit func(*config.Options)) *testServer {
	t.Helper()
	s := newTestServer(t, func(o *config.Options) {
		o.Catalog = catalogURI
		if edit != nil {
			edit(o)
		}
	})
	ctx := context.Background()
	st, err := catalog.OpenStore(ctx, catalogURI)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(ctx, st, catalog.Options{Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pd := s.EnablePooling(cat, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln, nil) }()
	t.Cleanup(func() {
		_ = stopServing(cancel, done)
		pd.Close()
		cat.Close()
	})
	return &testServer{Server: s, base: "http://" + ln.Addr().String(), t: t}
}

// TestReplicasShareCatalog: two servers on one catalog create the same
// queues at the same moment and post through both; every queue ends up on
// one pool, so each server sees both messages of every queue.
func TestReplicasShareCatalog(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	a, b := startReplica(t, mgmt.URL), startReplica(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	for i := 0; i < 3; i++ {
		r := testutil.StartRedis(t, testutil.RedisOptions{})
		a.must(201, "PUT", fmt.Sprintf("/v2/pools/r%d", i), adm, `{"weight":100,"uri":"`+r.URL+`"}`)
	}
	time.Sleep(300 * time.Millisecond) // b's catalog client polls every 50 ms
	const queues = 40
	var wg sync.WaitGroup
	for _, ts := range []*testServer{a, b} {
		wg.Add(1)
		go func(ts *testServer) {
			defer wg.Done()
			for i := 0; i < queues; i++ {
				path := fmt.Sprintf("/v2/queues/rq%02d", i)
				if r := ts.do("PUT", path, std(), ""); r.status != 201 && r.status != 204 {
					t.Errorf("PUT %s: %d %s", path, r.status, r.body)
				}
				if r := ts.do("POST", path+"/messages", std(), `{"messages":[{"body":1}]}`); r.status != 201 {
					t.Errorf("POST %s: %d %s", path, r.status, r.body)
				}
			}
		}(ts)
	}
	wg.Wait()
	for i := 0; i < queues; i++ {
		path := fmt.Sprintf("/v2/queues/rq%02d/stats", i)
		for _, ts := range []*testServer{a, b} {
			st := ts.must(200, "GET", path, std(), "").json(t)
			if total := st["messages"].(map[string]any)["total"]; total != float64(2) {
				t.Errorf("%s via %s: total %v, want 2 (placements diverged)", path, ts.base, total)
			}
		}
	}
}

// placedOn returns a function that reads from the catalog at catalogURI
// which pool a queue of project p1 is placed on.
func placedOn(t *testing.T, catalogURI string) func(queue string) string {
	t.Helper()
	ctx := context.Background()
	st, err := catalog.OpenStore(ctx, catalogURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return func(queue string) string {
		p, err := st.Lookup(ctx, storage.QueueRef{Project: "p1", Name: queue})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// queueOnEach creates queues named prefix00, prefix01, ... until one is
// placed on each of pools, and returns pool -> that queue.
func queueOnEach(t *testing.T, ts *testServer, catalogURI, prefix string, pools ...string) map[string]string {
	t.Helper()
	poolOf := placedOn(t, catalogURI)
	on := map[string]string{}
	for i := 0; i < 40 && len(on) < len(pools); i++ {
		name := fmt.Sprintf("%s%02d", prefix, i)
		ts.must(201, "PUT", "/v2/queues/"+name, std(), "")
		if p := poolOf(name); on[p] == "" {
			on[p] = name
		}
	}
	for _, p := range pools {
		if on[p] == "" {
			t.Fatalf("40 queues did not reach every pool of %v: %v", pools, on)
		}
	}
	return on
}
