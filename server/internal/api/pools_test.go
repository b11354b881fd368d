package api

import (
	"context"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage/catalog"
	_ "sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

// startPooledServer serves the API with --catalog pointing at catalogURI.
func startPooledServer(t *testing.T, catalogURI string) *testServer {
	t.Helper()
	s := newTestServer(t, func(o *config.Options) { o.Catalog = catalogURI })
	// As the process wiring (app) does with --catalog set.
	st, err := catalog.OpenStore(context.Background(), catalogURI)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(context.Background(), st, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.EnablePooling(cat, nil)
	t.Cleanup(func() { s.drv.Close() }) // after the server stops (cleanups run last first)
	return serve(t, s)
}

func TestPoolsAndFlavorsAPI(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	r1 := testutil.StartRedis(t, testutil.RedisOptions{})
	r2 := testutil.StartRedis(t, testutil.RedisOptions{})
	ts := startPooledServer(t, mgmt.URL)
	adm := std("X-Roles", "admin")
	js := func(s string) string { return s }

	ts.must(403, "GET", "/v2/pools", std(), "")
	if b := ts.must(200, "GET", "/v2/pools", adm, "").body; b != `{"links":[],"pools":[]}` {
		t.Errorf("empty pool list = %s", b)
	}
	r := ts.must(201, "PUT", "/v2/pools/p1", adm, js(`{"weight":100,"uri":"`+r1.URL+`","options":{}}`))
	if r.header.Get("Location") != "/v2/pools/p1" {
		t.Errorf("location %q", r.header.Get("Location"))
	}
	ts.must(201, "PUT", "/v2/pools/p2", adm, `{"weight":50,"uri":"`+r2.URL+`"}`)
	for _, bad := range []struct{ body, want string }{
		{`{"weight":10,"uri":"redis://127.0.0.1:1/0"}`, "cannot connect to redis://127.0.0.1:1/0"},
		{`{"uri":"` + r1.URL + `"}`, "'uri' and 'weight' are required"},
		{`{"weight":"x","uri":"` + r1.URL + `"}`, "'weight' must be an integer"},
		{`{"weight":-1,"uri":"` + r1.URL + `"}`, `between 0 and 4294967295`},
		{`{"weight":1,"uri":"http://h/"}`, `scheme must be`},
		{`{"weight":1,"uri":"` + r1.URL + `","extra":1}`, `Unknown field \"extra\"; a pool takes weight, uri, flavor and options.`},
		{`[1]`, "Document type not supported."},
		{`{"weight":1,"uri":7}`, "'uri' must be of type string"},
		{`{"weight":1,`, `Malformed JSON`},
	} {
		r := ts.do("PUT", "/v2/pools/p3", adm, bad.body)
		if r.status != 400 || !strings.Contains(r.body, bad.want) || !strings.Contains(r.body, `"title":"Invalid request body"`) {
			t.Errorf("PUT %s: %d %s, want 400 mentioning %q", bad.body, r.status, r.body, bad.want)
		}
	}
	ts.must(201, "PUT", "/v2/pools/p3?force=true", adm, `{"weight":0,"uri":"redis://127.0.0.1:1/0"}`)
	if b := ts.must(200, "GET", "/v2/pools/p1", adm, "").body; b != `{"name":"p1","uri":"`+r1.URL+`","weight":100,"flavor":null,"href":"/v2/pools/p1"}` {
		t.Errorf("GET pool = %s", b)
	}
	if b := ts.must(200, "GET", "/v2/pools/p1?detailed=true", adm, "").body; !strings.Contains(b, `"options":{}`) || !strings.Contains(b, `"queues":0`) {
		t.Errorf("detailed pool = %s", b)
	}
	r = ts.must(200, "GET", "/v2/pools?limit=2", adm, "")
	if !strings.Contains(r.body, `"href":"/v2/pools?limit=2\u0026marker=p2"`) && !strings.Contains(r.body, `"href":"/v2/pools?limit=2&marker=p2"`) {
		t.Errorf("pool page 1 = %s", r.body)
	}
	if b := ts.must(200, "GET", "/v2/pools?limit=2&marker=p2", adm, "").body; !strings.Contains(b, `"name":"p3"`) || strings.Contains(b, `"name":"p1"`) {
		t.Errorf("pool page 2 = %s", b)
	}
	if b := ts.must(200, "PATCH", "/v2/pools/p2", adm, `{"weight":60}`).body; !strings.Contains(b, `"weight":60`) {
		t.Errorf("PATCH pool = %s", b)
	}
	ts.must(400, "PATCH", "/v2/pools/p2", adm, `{}`)
	ts.must(404, "PATCH", "/v2/pools/nope", adm, `{"weight":1}`)

	// Flavors.
	ts.must(201, "PUT", "/v2/flavors/gold", adm, `{"pool_list":["p1"],"capabilities":{}}`)
	if r := ts.do("PUT", "/v2/flavors/bad", adm, `{"pool_list":["nope"]}`); r.status != 400 || !strings.Contains(r.body, "pool nope does not exist") {
		t.Errorf("flavor with unknown pool: %d %s", r.status, r.body)
	}
	for _, bad := range []struct{ method, body, want string }{
		{"PUT", `{"pool_list":[1]}`, "'pool_list' must be of type array of strings."},
		{"PUT", `{"pool_list":"p1"}`, "'pool_list' must be of type array of strings."},
		{"PUT", `{"pool_list":["p1"],"x":1}`, `Unknown field \"x\"; a flavor takes pool_list and capabilities.`},
		// Zaqar computes a flavor's capabilities from its pools: a PATCH of
		// capabilities alone changes nothing, and Zaqar refuses it.
		{"PATCH", `{"capabilities":{"x":1}}`, "'pool_list' needs to be specified."},
		{"PATCH", `{}`, "'pool_list' needs to be specified."},
	} {
		r := ts.do(bad.method, "/v2/flavors/gold", adm, bad.body)
		if r.status != 400 || !strings.Contains(r.body, bad.want) {
			t.Errorf("%s flavor %s: %d %s, want 400 mentioning %q", bad.method, bad.body, r.status, r.body, bad.want)
		}
	}
	if b := ts.must(200, "GET", "/v2/flavors/gold", adm, "").body; b != `{"name":"gold","capabilities":["FIFO","CLAIMS","AOD","HIGH_THROUGHPUT"],"pool_list":["p1"],"href":"/v2/flavors/gold"}` {
		t.Errorf("GET flavor = %s", b)
	}
	if b := ts.must(200, "GET", "/v2/pools/p1", adm, "").body; !strings.Contains(b, `"flavor":"gold"`) {
		t.Errorf("pool p1 after flavor = %s", b)
	}
	if b := ts.must(200, "GET", "/v2/flavors", adm, "").body; !strings.Contains(b, `"flavors":[{"name":"gold","pool_list":["p1"],"href":"/v2/flavors/gold"}]`) {
		t.Errorf("flavor list = %s", b)
	}
	ts.must(201, "PUT", "/v2/flavors/empty", adm, `{"pool_list":[]}`)
	// A MongoDB pool's flavor claims durability, as Zaqar's MongoDB driver
	// does (registered unreached: nothing here reads its storage).
	ts.must(201, "PUT", "/v2/pools/m1?force=true", adm, `{"weight":0,"uri":"mongodb://127.0.0.1:1/sluice"}`)
	ts.must(201, "PUT", "/v2/flavors/durable", adm, `{"pool_list":["m1"]}`)
	if b := ts.must(200, "GET", "/v2/flavors/durable", adm, "").body; b != `{"name":"durable","capabilities":["FIFO","CLAIMS","DURABILITY","AOD","HIGH_THROUGHPUT"],"pool_list":["m1"],"href":"/v2/flavors/durable"}` {
		t.Errorf("GET flavor of a MongoDB pool = %s", b)
	}
	ts.must(204, "DELETE", "/v2/flavors/durable", adm, "")
	ts.must(204, "DELETE", "/v2/pools/m1", adm, "")
	// Capabilities are those of the flavor's storage: none without a pool.
	if b := ts.must(200, "GET", "/v2/flavors/empty", adm, "").body; b != `{"name":"empty","capabilities":[],"pool_list":[],"href":"/v2/flavors/empty"}` {
		t.Errorf("GET flavor without pools = %s", b)
	}
	if b := ts.must(200, "GET", "/v2/flavors?detailed=true", adm, "").body; !strings.Contains(b, `{"name":"empty","capabilities":[],"pool_list":[],"href":"/v2/flavors/empty"}`) {
		t.Errorf("detailed flavor list = %s", b)
	}

	// Queues pick a flavor with _flavor.
	ts.must(201, "PUT", "/v2/queues/fq", std(), `{"_flavor":"gold"}`)
	ts.must(201, "POST", "/v2/queues/fq/messages", std(), `{"messages":[{"body":"on gold"}]}`)
	// The queue's shard is a header (the Zaqar body is unchanged), and the
	// detailed pool counts the queues placed on it.
	if r := ts.must(200, "GET", "/v2/queues/fq", std(), ""); r.header.Get("X-Sluice-Pool") != "p1" || strings.Contains(r.body, "p1") {
		t.Errorf("GET queue on gold: X-Sluice-Pool %q, body %s", r.header.Get("X-Sluice-Pool"), r.body)
	}
	if b := ts.must(200, "GET", "/v2/pools/p1?detailed=true", adm, "").body; !strings.Contains(b, `"queues":1`) {
		t.Errorf("detailed pool holding fq = %s", b)
	}
	if b := ts.must(200, "GET", "/v2/pools/p1", adm, "").body; strings.Contains(b, `"queues"`) {
		t.Errorf("plain pool GET shows the queue count: %s", b)
	}
	if r := ts.do("PUT", "/v2/queues/uq", std(), `{"_flavor":"nosuch"}`); r.status != 400 || !strings.Contains(r.body, "Flavor nosuch does not exist") {
		t.Errorf("unknown flavor: %d %s", r.status, r.body)
	}
	if r := ts.do("PUT", "/v2/queues/eq", std(), `{"_flavor":"empty"}`); r.status != 400 || !strings.Contains(r.body, "Flavor empty has no pool") {
		t.Errorf("flavor without pools: %d %s", r.status, r.body)
	}
	ts.must(201, "PUT", "/v2/queues/nq", std(), "")
	if b := ts.must(200, "GET", "/v2/queues", std(), "").body; !strings.Contains(b, `"fq"`) || !strings.Contains(b, `"nq"`) {
		t.Errorf("pooled queue list = %s", b)
	}
	if st := ts.must(200, "GET", "/v2/queues/fq/stats", std(), "").json(t); st["messages"].(map[string]any)["total"] != float64(1) {
		t.Errorf("fq stats = %v", st)
	}
	if b := ts.must(200, "GET", "/v2/health", adm, "").body; !strings.Contains(b, `"catalog_reachable":true`) || !strings.Contains(b, `"p3":{"error"`) {
		t.Errorf("pooled health = %s", b)
	}

	// A pool holding queues cannot go; the answer says how many.
	if r := ts.do("DELETE", "/v2/pools/p1", adm, ""); r.status != 409 || !strings.Contains(r.body, "still holds") {
		t.Errorf("delete busy pool: %d %s", r.status, r.body)
	}
	ts.must(204, "DELETE", "/v2/queues/fq", std(), "")
	ts.must(204, "DELETE", "/v2/queues/nq", std(), "")
	ts.must(204, "DELETE", "/v2/flavors/gold", adm, "")
	ts.must(204, "DELETE", "/v2/flavors/empty", adm, "")
	for _, p := range []string{"p1", "p2", "p3"} {
		ts.must(204, "DELETE", "/v2/pools/"+p, adm, "")
	}
	if b := ts.must(404, "GET", "/v2/pools/p1", adm, "").body; b != `{"title":"Not found","description":"Pool p1 does not exist"}` {
		t.Errorf("deleted pool = %s", b)
	}
}

// TestPoolsRoutesNeedCatalog: without --catalog the admin routes do not
// exist, as in Zaqar with pooling disabled.
func TestPoolsRoutesNeedCatalog(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(404, "GET", "/v2/pools", std("X-Roles", "admin"), "")
	ts.must(404, "PUT", "/v2/flavors/gold", std("X-Roles", "admin"), `{"pool_list":[]}`)
}
