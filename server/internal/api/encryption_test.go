package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/testutil"
)

// keyLine is a line of the key file: id and 32 bytes of b.
func keyLine(id string, b byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// keyFile writes a key file of lines and returns its path.
func keyFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("# sluice test keys\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startFull serves a server with the delivery engine running; with
// catalogURI it routes through a pool catalog, as app does with --catalog.
func startFull(t *testing.T, catalogURI string, edit func(*config.Options)) *testServer {
	t.Helper()
	s := newTestServer(t, func(o *config.Options) {
		o.Deliveries = true
		o.DeliveryPoll = 20 * time.Millisecond
		o.DeliveryIdlePoll = 100 * time.Millisecond
		o.DeliveryRetryMin = 20 * time.Millisecond
		o.DeliveryRetryMax = 200 * time.Millisecond
		o.Catalog = catalogURI
		if edit != nil {
			edit(o)
		}
	})
	if catalogURI != "" {
		st, err := catalog.OpenStore(context.Background(), catalogURI)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := catalog.New(context.Background(), st, catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.EnablePooling(cat, nil)
		t.Cleanup(func() { s.store.Close() })
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop, err := s.StartDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		_ = stopServing(cancel, done)
		stop()
	})
	return &testServer{Server: s, base: "http://" + ln.Addr().String(), t: t}
}

// redisDump is everything a redis-server holds, as its RDB file written
// uncompressed: bytes a marker must not appear in.
func redisDump(t *testing.T, r *testutil.Redis) []byte {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "rdbcompression", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mongoDocs is every document of every collection of database db, as raw
// BSON.
func mongoDocs(t *testing.T, uri, db string) []byte {
	t.Helper()
	ctx := context.Background()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	names, err := c.Database(db).ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, n := range names {
		cur, err := c.Database(db).Collection(n).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			out = append(out, cur.Current...)
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// memoryBodies is what the memory store holds of the queues' messages,
// read under the encryption wrapper.
func memoryBodies(t *testing.T, ts *testServer, queues ...string) []byte {
	t.Helper()
	var out []byte
	for _, q := range queues {
		l, _, err := ts.store.Messages().List(context.Background(), storage.QueueRef{Project: "p1", Name: q},
			storage.ListMessagesOptions{Limit: 100, Echo: true, IncludeClaimed: true, IncludeDelayed: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range l {
			out = append(out, m.Body...)
		}
	}
	return out
}

// TestEncryptedReadPaths posts marker bodies to a queue with
// _enable_encrypt_messages and one without, on every store: the store's
// own bytes (Redis' RDB file, MongoDB's documents, the memory store below
// the wrapper) never hold the encrypted markers, and hold the plain one,
// while every read path shows them: get, get many, list, stats, claim,
// claim get, dead letter (into a queue without the flag), pop and the
// webhook notification.
func TestEncryptedReadPaths(t *testing.T) {
	keys := keyFile(t, keyLine("k1", 1))
	withKeys := func(o *config.Options) { o.EncryptionKeyFile = keys }
	t.Run("memory", func(t *testing.T) {
		ts := startFull(t, "", withKeys)
		readPaths(t, ts, func() []byte { return memoryBodies(t, ts, "enc", "plain", "enc-dead") })
	})
	t.Run("redis", func(t *testing.T) {
		r := testutil.StartRedis(t, testutil.RedisOptions{})
		ts := startFull(t, "", func(o *config.Options) { withKeys(o); o.Store = r.URL })
		readPaths(t, ts, func() []byte { return redisDump(t, r) })
	})
	t.Run("mongodb", func(t *testing.T) {
		fdb := testutil.StartFerretDB(t)
		ts := startFull(t, "", func(o *config.Options) { withKeys(o); o.Store = fdb.URI("sluice_enc") })
		readPaths(t, ts, func() []byte { return mongoDocs(t, fdb.URI(""), "sluice_enc") })
	})
	t.Run("pooled", func(t *testing.T) {
		mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
		pool := testutil.StartRedis(t, testutil.RedisOptions{})
		ts := startFull(t, mgmt.URL, withKeys)
		ts.must(201, "PUT", "/v2/pools/p1", std("X-Roles", "admin"), `{"weight":100,"uri":"`+pool.URL+`"}`)
		readPaths(t, ts, func() []byte { return append(redisDump(t, pool), redisDump(t, mgmt)...) })
	})
}

func readPaths(t *testing.T, ts *testServer, raw func() []byte) {
	hook := testutil.StartWebhook(t)
	hook.Down() // deliveries stay pending, so their copies are in the raw bytes
	h := std()
	ts.must(201, "PUT", "/v2/queues/enc", h, `{"_enable_encrypt_messages":true,"_max_claim_count":1,"_dead_letter_queue":"enc-dead"}`)
	ts.must(201, "PUT", "/v2/queues/plain", h, `{}`)
	for _, q := range []string{"enc", "plain"} {
		ts.must(201, "POST", "/v2/queues/"+q+"/subscriptions", h, `{"subscriber":"`+hook.URL("/"+q)+`","ttl":3600}`)
	}
	mark := func(n string) string { return "marker-" + n + "-7f3a9c" }
	posted := ts.must(201, "POST", "/v2/queues/enc/messages", h,
		`{"messages":[{"body":{"m":"`+mark("a")+`"}},{"body":"`+mark("b")+`"},{"body":["`+mark("c")+`"]}]}`).json(t)
	ts.must(201, "POST", "/v2/queues/plain/messages", h, `{"messages":[{"body":"`+mark("plain")+`"}]}`)
	var ids []string
	for _, href := range posted["resources"].([]any) {
		ids = append(ids, href.(string)[strings.LastIndex(href.(string), "/")+1:])
	}

	stored := raw()
	for _, n := range []string{"a", "b", "c"} {
		if bytes.Contains(stored, []byte(mark(n))) {
			t.Errorf("the store holds %s in the clear", mark(n))
		}
	}
	if !bytes.Contains(stored, []byte(mark("plain"))) {
		t.Errorf("the store does not hold the plain queue's %s: the raw read sees nothing", mark("plain"))
	}

	shows := func(what string, r resp, names ...string) {
		t.Helper()
		for _, n := range names {
			if !strings.Contains(r.body, mark(n)) {
				t.Errorf("%s: %s does not show %s", what, r.body, mark(n))
			}
		}
		if strings.Contains(r.body, "~v1~") || strings.Contains(r.body, "body_error") {
			t.Errorf("%s shows an envelope: %s", what, r.body)
		}
	}
	shows("get", ts.must(200, "GET", "/v2/queues/enc/messages/"+ids[0], h, ""), "a")
	shows("get many", ts.must(200, "GET", "/v2/queues/enc/messages?ids="+strings.Join(ids, ","), h, ""), "a", "b", "c")
	shows("list", ts.must(200, "GET", "/v2/queues/enc/messages?echo=true", h, ""), "a", "b", "c")
	shows("stats", ts.must(200, "GET", "/v2/queues/enc/stats", h, ""), "a", "c")
	cl := ts.must(201, "POST", "/v2/queues/enc/claims?limit=1", h, `{"ttl":60,"grace":60}`)
	shows("claim", cl, "a")
	claim := cl.header.Get("Location")
	shows("claim get", ts.must(200, "GET", claim, h, ""), "a")
	ts.must(204, "DELETE", claim, h, "")
	// a was claimed once, the limit: the next claim moves it to the
	// dead-letter queue, which has no flag, and takes b.
	cl = ts.must(201, "POST", "/v2/queues/enc/claims?limit=1", h, `{"ttl":60,"grace":60}`)
	shows("claim after release", cl, "b")
	shows("dead letter", ts.must(200, "GET", "/v2/queues/enc-dead/messages?echo=true", h, ""), "a")
	shows("pop", ts.must(200, "DELETE", "/v2/queues/enc/messages?pop=1", h, ""), "c")

	hook.Up()
	waitFor(t, func() bool { return len(hook.Received()) >= 4 })
	var got []string
	for _, r := range hook.Received() {
		if strings.HasPrefix(r.Path, "/enc") {
			got = append(got, string(r.Body))
		}
	}
	shows("notifications", resp{body: strings.Join(got, "\n")}, "a", "b", "c")
	if len(got) != 3 {
		t.Errorf("notifications of enc: %d, want 3", len(got))
	}
}

// TestEncryptedMoveBetweenPools moves an encrypted queue from a Redis pool
// to a MongoDB (FerretDB) pool: the envelopes move as they are (neither
// store ever holds the marker) and read on the target.
func TestEncryptedMoveBetweenPools(t *testing.T) {
	mgmt := testutil.StartRedis(t, testutil.RedisOptions{})
	r1 := testutil.StartRedis(t, testutil.RedisOptions{})
	fdb := testutil.StartFerretDB(t)
	ts := startFull(t, mgmt.URL, func(o *config.Options) { o.EncryptionKeyFile = keyFile(t, keyLine("k1", 1)) })
	adm, h := std("X-Roles", "admin"), std()
	ts.must(201, "PUT", "/v2/pools/p1", adm, `{"weight":100,"uri":"`+r1.URL+`"}`)
	ts.must(201, "PUT", "/v2/pools/p2", adm, `{"weight":0,"uri":"`+fdb.URI("sluice_move")+`"}`)
	ts.must(201, "PUT", "/v2/queues/mv", h, `{"_enable_encrypt_messages":true}`)
	var msgs []string
	for i := 0; i < 12; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"body":"moved-marker-%02d"}`, i))
	}
	ts.must(201, "POST", "/v2/queues/mv/messages", h, `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	ts.must(201, "POST", "/v2/queues/mv/claims?limit=2", h, `{"ttl":300,"grace":60}`)
	ts.must(202, "POST", "/v2/queues/mv/migrate", adm, `{"pool":"p2"}`)
	waitForState(t, func() bool {
		return ts.must(200, "GET", "/v2/queues/mv/migrate", adm, "").json(t)["state"] == "done"
	})
	if b := mongoDocs(t, fdb.URI(""), "sluice_move"); !bytes.Contains(b, []byte("~v1~k1~")) || bytes.Contains(b, []byte("moved-marker")) {
		t.Errorf("the target pool's documents: envelope %v, marker %v",
			bytes.Contains(b, []byte("~v1~k1~")), bytes.Contains(b, []byte("moved-marker")))
	}
	if bytes.Contains(redisDump(t, r1), []byte("moved-marker")) {
		t.Errorf("the source pool holds a marker in the clear")
	}
	list := ts.must(200, "GET", "/v2/queues/mv/messages?echo=true&include_claimed=true&limit=20", h, "").body
	for i := 0; i < 12; i++ {
		if !strings.Contains(list, fmt.Sprintf("moved-marker-%02d", i)) {
			t.Errorf("after the move the listing lacks moved-marker-%02d: %s", i, list)
		}
	}
	// Posted on the target, still sealed.
	ts.must(201, "POST", "/v2/queues/mv/messages", h, `{"messages":[{"body":"after-move-marker"}]}`)
	if bytes.Contains(mongoDocs(t, fdb.URI(""), "sluice_move"), []byte("after-move-marker")) {
		t.Errorf("a post after the move is stored in the clear")
	}
}

// TestKeyRotationAcrossRestarts: three servers in turn on one Redis, as
// one server restarted with a new key file each time. Messages written
// under k1 read once k2 is prepended, new ones are sealed under k2, and
// once k1 is dropped its messages come back with "body": null and a
// body_error, next to the others, in every read path; they can still be
// claimed and deleted. A body changed in the store reads the same way.
func TestKeyRotationAcrossRestarts(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	store := r.URL
	server := func(lines ...string) *testServer {
		return startServer(t, func(o *config.Options) { o.Store = store; o.EncryptionKeyFile = keyFile(t, lines...) })
	}
	h := std()
	id := func(res resp) string {
		href := res.json(t)["resources"].([]any)[0].(string)
		return href[strings.LastIndex(href, "/")+1:]
	}
	a := server(keyLine("k1", 1))
	a.must(201, "PUT", "/v2/queues/rot", h, `{"_enable_encrypt_messages":true}`)
	old := id(a.must(201, "POST", "/v2/queues/rot/messages", h, `{"messages":[{"body":"written-under-k1"}]}`))

	b := server(keyLine("k2", 2), keyLine("k1", 1))
	if got := b.must(200, "GET", "/v2/queues/rot/messages/"+old, h, "").body; !strings.Contains(got, "written-under-k1") {
		t.Errorf("k1's message after prepending k2: %s", got)
	}
	fresh := id(b.must(201, "POST", "/v2/queues/rot/messages", h, `{"messages":[{"body":"written-under-k2"}]}`))
	m, err := b.store.Messages().Get(context.Background(), storage.QueueRef{Project: "p1", Name: "rot"}, fresh)
	if err != nil || !strings.HasPrefix(string(m.Body), "~v1~k2~") {
		t.Errorf("the new message is stored as %q (%v), want sealed under k2", m.Body, err)
	}
	tampered := id(b.must(201, "POST", "/v2/queues/rot/messages", h, `{"messages":[{"body":"to-be-tampered"}]}`))
	tamper(t, r, tampered)

	c := server(keyLine("k2", 2))
	unreadable := `"body":null,"body_error":"` + descBodyUnreadable + `"`
	for _, path := range []string{"/v2/queues/rot/messages/" + old, "/v2/queues/rot/messages/" + tampered} {
		if got := c.must(200, "GET", path, h, "").body; !strings.Contains(got, unreadable) {
			t.Errorf("GET %s after dropping k1: %s", path, got)
		}
	}
	for _, path := range []string{"/v2/queues/rot/messages?echo=true", "/v2/queues/rot/messages?ids=" + old + "," + fresh + "," + tampered,
		"/v2/queues/rot/stats"} {
		got := c.must(200, "GET", path, h, "").body
		if !strings.Contains(got, unreadable) || (!strings.Contains(path, "stats") && !strings.Contains(got, "written-under-k2")) {
			t.Errorf("GET %s after dropping k1: %s", path, got)
		}
	}
	cl := c.must(201, "POST", "/v2/queues/rot/claims?limit=10", h, `{"ttl":60,"grace":60}`)
	if strings.Count(cl.body, unreadable) != 2 || !strings.Contains(cl.body, "written-under-k2") {
		t.Errorf("claim after dropping k1: %s", cl.body)
	}
	for _, mid := range []string{old, fresh, tampered} {
		c.must(204, "DELETE", "/v2/queues/rot/messages/"+mid+"?claim_id="+cl.header.Get("Location")[len("/v2/queues/rot/claims/"):], h, "")
	}
	c.must(204, "DELETE", "/v2/queues/rot", h, "")
}

// tamper flips one character of the stored envelope of message id, an
// entry of the Redis stream area (its id ends in the seq, 16 hex digits:
// lib.lua's xid). An entry cannot change in place, so its stream is
// written again with the same entry ids and TTL.
func tamper(t *testing.T, r *testutil.Redis, id string) {
	t.Helper()
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr})
	defer c.Close()
	seq, err := strconv.ParseUint(strings.ReplaceAll(id[len(id)-17:], "-", ""), 16, 64)
	if err != nil {
		t.Fatalf("message id %s: %v", id, err)
	}
	eid := strconv.FormatUint(seq, 10) + "-0"
	streams, err := c.Keys(ctx, "*:x").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range streams {
		entries, err := c.XRange(ctx, k, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(entries, func(e goredis.XMessage) bool { return e.ID == eid })
		if i < 0 {
			continue
		}
		body, _ := entries[i].Values["b"].(string)
		if !strings.HasPrefix(body, "~v1~") {
			t.Fatalf("stored body %q", body)
		}
		b := []byte(body)
		j := len(b) - 10
		b[j] = map[bool]byte{true: 'B', false: 'A'}[b[j] == 'A']
		entries[i].Values["b"] = string(b)
		ttl := c.PTTL(ctx, k).Val()
		_, err = c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Del(ctx, k)
			for _, e := range entries {
				p.XAdd(ctx, &goredis.XAddArgs{Stream: k, ID: e.ID, Values: e.Values})
			}
			if ttl > 0 {
				p.PExpire(ctx, k, ttl)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no stream entry of message %s", id)
}

// TestEncryptionFlag: without a key the flag is refused on create and on
// PATCH, with the reason; a non-boolean is refused either way; with a key
// it is taken. A queue that already has the flag, on a server without a
// key, refuses posts rather than store them in the clear.
func TestEncryptionFlag(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	plain := startServer(t, func(o *config.Options) { o.Store = r.URL })
	keyed := startServer(t, func(o *config.Options) {
		o.Store = r.URL
		o.EncryptionKeyFile = keyFile(t, keyLine("k1", 1))
	})
	h := std()
	patch := std("Content-Type", patchMediaType)
	bad := func(ts *testServer, method, path string, hd hdr, body, want string) {
		t.Helper()
		res := ts.do(method, path, hd, body)
		if res.status != 400 || !strings.Contains(res.body, want) || !strings.Contains(res.body, `"title"`) {
			t.Errorf("%s %s %s: %d %s, want 400 saying %q", method, path, body, res.status, res.body, want)
		}
	}
	bad(plain, "PUT", "/v2/queues/f1", h, `{"_enable_encrypt_messages":true}`, descEncryptNeedsKey)
	plain.must(201, "PUT", "/v2/queues/f1", h, `{"_enable_encrypt_messages":false}`)
	bad(plain, "PATCH", "/v2/queues/f1", patch, `[{"op":"replace","path":"/metadata/_enable_encrypt_messages","value":true}]`, descEncryptNeedsKey)
	for _, ts := range []*testServer{plain, keyed} {
		bad(ts, "PUT", "/v2/queues/f2", h, `{"_enable_encrypt_messages":"yes"}`, "_enable_encrypt_messages must be boolean.")
		bad(ts, "PATCH", "/v2/queues/f1", patch, `[{"op":"add","path":"/metadata/_enable_encrypt_messages","value":1}]`,
			"_enable_encrypt_messages must be boolean.")
	}
	keyed.must(200, "PATCH", "/v2/queues/f1", patch, `[{"op":"replace","path":"/metadata/_enable_encrypt_messages","value":true}]`)
	keyed.must(201, "PUT", "/v2/queues/f3", h, `{"_enable_encrypt_messages":true}`)
	keyed.must(201, "POST", "/v2/queues/f3/messages", h, `{"messages":[{"body":1}]}`)

	res := plain.do("POST", "/v2/queues/f3/messages", h, `{"messages":[{"body":"not-stored"}]}`)
	if res.status != 409 || !strings.Contains(res.body, "has no encryption key (--encryption-key-file)") {
		t.Errorf("post to an encrypted queue on a server without a key: %d %s", res.status, res.body)
	}
	if st := plain.must(200, "GET", "/v2/queues/f3/stats", h, "").body; !strings.Contains(st, `"total":1`) {
		t.Errorf("stats after the refused post: %s", st)
	}
	// Turning the flag off keeps what was sealed readable and stores new
	// posts in the clear.
	keyed.must(200, "PATCH", "/v2/queues/f3", patch, `[{"op":"remove","path":"/metadata/_enable_encrypt_messages"}]`)
	keyed.must(201, "POST", "/v2/queues/f3/messages", h, `{"messages":[{"body":2}]}`)
	if got := keyed.must(200, "GET", "/v2/queues/f3/messages?echo=true", h, "").body; !strings.Contains(got, `"body":1}`) || !strings.Contains(got, `"body":2}`) {
		t.Errorf("after turning the flag off: %s", got)
	}
}

// BenchmarkPostEncrypted is BenchmarkPostMessage on a queue without and
// with _enable_encrypt_messages (memory store): what sealing adds to the
// server's side of a POST.
func BenchmarkPostEncrypted(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[on], func(b *testing.B) {
			dir := b.TempDir()
			keys := filepath.Join(dir, "keys")
			if err := os.WriteFile(keys, []byte(keyLine("k1", 1)+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			s := newTestServer(b, func(o *config.Options) { o.EncryptionKeyFile = keys })
			q := refOf("bench", "bench")
			if err := s.drv.Queues().SetMetadata(context.Background(), q, storage.Metadata{"_enable_encrypt_messages": on}); err != nil {
				b.Fatal(err)
			}
			body := benchBody()
			req := httptest.NewRequest("POST", "/v2/queues/bench/messages", nil)
			req.Header.Set("Client-ID", testClient)
			req.Header.Set("X-Project-ID", "bench")
			req.Header.Set("Content-Type", "application/json")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := req.Clone(req.Context())
				r.Body = nopCloser{bytes.NewReader(body)}
				r.ContentLength = int64(len(body))
				clear(w.h)
				s.ServeHTTP(w, r)
				if w.status != 201 {
					b.Fatalf("status %d", w.status)
				}
				if i%1000 == 999 {
					s.drv.Queues().Purge(req.Context(), q)
				}
			}
		})
	}
}

// TestUndecryptableDeliveriesWait: a replica without the key that sealed
// a message never notifies it with a null body: its attempts fail (the
// reason in the queue's deliveries) and the delivery stays pending until a
// replica holding the key sends it with the plaintext.
func TestUndecryptableDeliveriesWait(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	hook := testutil.StartWebhook(t)
	h := std()
	keys := keyFile(t, keyLine("k1", 1))
	writer := startServer(t, func(o *config.Options) { o.Store = r.URL; o.EncryptionKeyFile = keys; o.Deliveries = false })
	writer.must(201, "PUT", "/v2/queues/n", h, `{"_enable_encrypt_messages":true}`)
	writer.must(201, "POST", "/v2/queues/n/subscriptions", h, `{"subscriber":"`+hook.URL("/n")+`","ttl":3600}`)
	writer.must(201, "POST", "/v2/queues/n/messages", h, `{"messages":[{"body":"notify-marker"}]}`)

	keyless := startFull(t, "", func(o *config.Options) { o.Store = r.URL })
	waitFor(t, func() bool {
		return strings.Contains(keyless.must(200, "GET", "/v2/queues/n/deliveries", h, "").body, storage.ErrUndecryptable.Error())
	})
	if got := hook.Received(); len(got) != 0 {
		t.Fatalf("a replica without the key notified: %s", got[0].Body)
	}
	if d := keyless.must(200, "GET", "/v2/queues/n/deliveries", h, "").json(t); d["pending"] != float64(1) {
		t.Errorf("deliveries: %v", d)
	}

	startFull(t, "", func(o *config.Options) { o.Store = r.URL; o.EncryptionKeyFile = keys })
	waitFor(t, func() bool { return len(hook.Received()) > 0 })
	if got := hook.Received(); len(got) != 1 || !strings.Contains(string(got[0].Body), `"body": "notify-marker"`) {
		t.Errorf("notified: %q", got)
	}
}

// BenchmarkClaimDeleteEncrypted claims one message and deletes it with its
// claim id, on a queue without and with _enable_encrypt_messages (memory
// store, the queue refilled as it drains): what opening adds to a claim.
func BenchmarkClaimDeleteEncrypted(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[on], func(b *testing.B) {
			keys := filepath.Join(b.TempDir(), "keys")
			if err := os.WriteFile(keys, []byte(keyLine("k1", 1)+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			s := newTestServer(b, func(o *config.Options) { o.EncryptionKeyFile = keys })
			ctx, q := context.Background(), refOf("bench", "bench")
			if err := s.drv.Queues().SetMetadata(ctx, q, storage.Metadata{"_enable_encrypt_messages": on}); err != nil {
				b.Fatal(err)
			}
			body := benchBody()
			msgs, _ := parsePostMessages(body, s.settingsOf(storage.Metadata{"_enable_encrypt_messages": on}), s.messageLimits())
			claimBody := []byte(`{"ttl":60,"grace":60}`)
			serve := func(method, target string, body []byte, want int) *discardWriter {
				r := httptest.NewRequest(method, target, nopCloser{bytes.NewReader(body)})
				r.Header.Set("Client-ID", testClient)
				r.Header.Set("X-Project-ID", "bench")
				r.Header.Set("Content-Type", "application/json")
				w := &discardWriter{h: http.Header{}}
				s.ServeHTTP(w, r)
				if w.status != want {
					b.Fatalf("%s %s: status %d", method, target, w.status)
				}
				return w
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%500 == 0 {
					b.StopTimer()
					for range 5 {
						batch := make([]storage.NewMessage, 100)
						for j := range batch {
							batch[j] = msgs[0]
						}
						if _, err := s.drv.Messages().Post(ctx, q, testClient, batch); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
				w := serve("POST", "/v2/queues/bench/claims?limit=1", claimBody, 201)
				loc := w.h.Get("Location")
				// Below the wrapper: the harness opens nothing.
				c, err := s.store.Claims().Get(ctx, q, loc[strings.LastIndex(loc, "/")+1:])
				if err != nil || len(c.Messages) != 1 {
					b.Fatalf("claim: %v %v", c, err)
				}
				serve("DELETE", "/v2/queues/bench/messages/"+c.Messages[0].ID+"?claim_id="+c.ID, nil, 204)
			}
		})
	}
}
