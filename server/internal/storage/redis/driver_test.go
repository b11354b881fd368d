package redis

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

func queueRef(p, q string) storage.QueueRef { return storage.QueueRef{Project: p, Name: q} }

func openAt(t testing.TB, uri string, clock storage.Clock) *Driver {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), u, storagetest.Options(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// stored counts the messages the queue holds in either area: message
// hashes (indexed in :ids) and stream entries.
func stored(t testing.TB, d *Driver, q storage.QueueRef) int64 {
	t.Helper()
	ctx := context.Background()
	n, err := d.c.ZCard(ctx, scope(q)+":ids").Result()
	if err != nil {
		t.Fatal(err)
	}
	x, err := d.c.XLen(ctx, scope(q)+":x").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n + x
}

func post(t *testing.T, d *Driver, q storage.QueueRef, n int, ttl time.Duration) ([]string, error) {
	t.Helper()
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: ttl, Body: json.RawMessage(`{"n":1}`)}
	}
	return d.Messages().Post(context.Background(), q, "c", msgs)
}

// TestCleanupWithoutSweeper checks that scripts remove expired data as a
// side effect of ordinary calls and that every key except the queue's own
// hash carries a Redis TTL, so nothing outlives its data untouched.
func TestCleanupWithoutSweeper(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	clock := storagetest.NewClock()
	d := openAt(t, r.URL, clock)
	ctx := context.Background()
	q := queueRef("p", "q")
	if _, err := post(t, d, q, 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	keys, err := d.c.Keys(ctx, escapeGlob(scope(q))+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := stored(t, d, q); n != 10 {
		t.Fatalf("%d messages stored of 10: keys %v", n, keys)
	}
	for _, k := range keys {
		ttl, err := d.c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if k == scope(q)+":q" {
			if ttl != -1 {
				t.Errorf("queue hash %s has ttl %v; queues live until deleted", k, ttl)
			}
		} else if ttl <= 0 {
			t.Errorf("key %s has no TTL (%v)", k, ttl)
		}
	}
	// A long claim raises a message's expiry past the indexes' horizon:
	// every index must then live at least as long as that message.
	long := queueRef("p", "long")
	if _, err := post(t, d, long, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Claims().Create(ctx, long, storage.ClaimOptions{TTL: 12 * time.Hour, Grace: time.Minute, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{":ids", ":exp", ":held", ":cl"} {
		if ttl, _ := d.c.PTTL(ctx, scope(long)+suffix).Result(); ttl < 12*time.Hour {
			t.Errorf("index %s lives %v, less than its claimed message", suffix, ttl)
		}
	}
	if err := d.Queues().Delete(ctx, long); err != nil {
		t.Fatal(err)
	}
	// Past every expiry, the next write on the queue clears the old data.
	clock.Advance(3 * time.Minute)
	if _, err := post(t, d, q, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Queues().Stats(ctx, q); err != nil { // runs every cleanup step
		t.Fatal(err)
	}
	if n := stored(t, d, q); n != 1 {
		t.Errorf("%d messages stored after expiry, want 1", n)
	}
	// The stream area: the message is an entry, no key of its own.
	if msgKeys, _ := d.c.Keys(ctx, escapeGlob(scope(q)+":m:")+"*").Result(); len(msgKeys) != 0 {
		t.Errorf("after expiry: message keys %v", msgKeys)
	}
}

func TestUnavailableAndRecovery(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	q := queueRef("p", "q")
	if _, err := post(t, d, q, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	// A server may start before its Redis: opening must not need it.
	late := openAt(t, r.URL, storage.SystemClock{})
	if err := late.Ping(ctx); !storage.Is(err, storage.Unavailable) {
		t.Errorf("ping of a driver opened while redis is down: %v", err)
	}
	calls := map[string]func() error{
		"ping": func() error { return d.Ping(ctx) },
		"post": func() error { _, err := post(t, d, q, 1, time.Minute); return err },
		"list": func() error {
			_, _, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 1})
			return err
		},
		"claim": func() error {
			_, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 1})
			return err
		},
		"stats": func() error { _, err := d.Queues().Stats(ctx, q); return err },
		"meta":  func() error { _, err := d.Queues().GetMetadata(ctx, q); return err },
		"depth": func() error { _, err := d.Depth(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !storage.Is(err, storage.Unavailable) {
			t.Errorf("%s with redis down: %v, want kind unavailable", name, err)
		}
	}
	// A fresh server has an empty script cache: the driver must reload
	// scripts by itself and serve again without being reopened.
	r.Restart(t)
	var err error
	for i := 0; i < 50; i++ {
		if _, err = post(t, d, q, 1, time.Minute); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("driver did not recover after redis came back: %v", err)
	}
	if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != 1 {
		t.Errorf("stats after recovery = %+v, %v", st, err)
	}
	if st, err := late.Queues().Stats(ctx, q); err != nil || st.Total != 1 {
		t.Errorf("driver opened while redis was down, after recovery: %+v, %v", st, err)
	}
}

func TestSentinelURI(t *testing.T) {
	m := testutil.StartRedis(t, testutil.RedisOptions{})
	s := testutil.StartSentinel(t, m, "mymaster")
	d := openAt(t, s.URL, storage.SystemClock{})
	q := queueRef("p", "via-sentinel")
	var ids []string
	var err error
	// The sentinel may need a moment to learn the master's state.
	for i := 0; i < 50; i++ {
		if ids, err = post(t, d, q, 2, time.Minute); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("post through sentinel: %v", err)
	}
	// The data landed on the master the sentinel monitors.
	direct := openAt(t, m.URL, storage.SystemClock{})
	if got, err := direct.Messages().GetMany(context.Background(), q, ids); err != nil || len(got) != 2 {
		t.Errorf("messages on the master = %d, %v", len(got), err)
	}
}

func TestLeftoversSeesStrayKeys(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	q := queueRef("p*", "q")
	if _, err := post(t, d, q, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.Queues().Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	if left, err := d.Leftovers(ctx, "p*"); err != nil || len(left) != 0 {
		t.Fatalf("after delete: %v, %v", left, err)
	}
	d.c.Set(ctx, scope(q)+":m:stray", "x", 0)
	d.c.Set(ctx, scope(queueRef("p", "other"))+":q", "x", 0) // another project: not reported
	left, err := d.Leftovers(ctx, "p*")
	if err != nil || len(left) != 1 || !strings.HasSuffix(left[0], ":m:stray") {
		t.Errorf("leftovers = %v, %v; want the stray key only", left, err)
	}
}

// TestModelKeepsTTLs runs the model's generated sequences (posts, claims,
// dead-lettering, releases, deletes, purges, clock steps) with an
// invariant checked after every action: every key of a queue but its hash
// carries a Redis TTL, whichever script created it, so nothing outlives
// its data untouched (lib.lua's absent and keepalive).
func TestModelKeepsTTLs(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	open := func(t testing.TB, clock storage.Clock) storage.Driver { return openAt(t, r.URL, clock) }
	storagetest.RunModel(t, open, storagetest.ModelOptions{Checks: 100, Invariant: func(rt *rapid.T, d storage.Driver, q storage.QueueRef) {
		c := d.(*Driver).c
		ctx := context.Background()
		keys, err := c.Keys(ctx, escapeGlob(scope(q))+":*").Result()
		if err != nil {
			rt.Fatal(err)
		}
		for _, k := range keys {
			if k == scope(q)+":q" {
				continue
			}
			if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
				rt.Fatalf("key %s has no TTL (%v, %v)", k, ttl, err)
			}
		}
	}})
}

// TestClaimHoldsEntriesInPlace checks the claim path
// (lib.lua, "The stream area"): a claim that need not raise a message's
// expiry writes no key per message, a delete with its claim id removes
// the entry, and a message whose claim ends without a delete (released,
// lapsed) or must outlive its entry becomes a message hash, free or held
// as before, claimed once.
func TestClaimHoldsEntriesInPlace(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	clock := storagetest.NewClock()
	d := openAt(t, r.URL, clock)
	ctx := context.Background()
	q := queueRef("p", "q")
	msgKeys := func() int {
		t.Helper()
		keys, err := d.c.Keys(ctx, escapeGlob(scope(q)+":m:")+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	if _, err := post(t, d, q, 6, time.Hour); err != nil {
		t.Fatal(err)
	}
	claim := func(limit int, ttl time.Duration) storage.Claim {
		t.Helper()
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: ttl, Grace: time.Minute, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Messages) != limit {
			t.Fatalf("claimed %d messages, want %d", len(c.Messages), limit)
		}
		return c
	}
	a := claim(2, time.Minute)
	if n := msgKeys(); n != 0 {
		t.Fatalf("a claim within the messages' lives wrote %d message keys, want 0", n)
	}
	if err := d.Messages().Delete(ctx, q, a.Messages[0].ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if n := stored(t, d, q); n != 5 {
		t.Fatalf("%d messages stored after deleting one of 6, want 5", n)
	}
	got, err := d.Messages().Get(ctx, q, a.Messages[1].ID)
	if err != nil || got.ClaimID != a.ID || got.ClaimCount != 1 {
		t.Fatalf("held message: %+v, %v; want claim %s, count 1", got, err, a.ID)
	}
	// Released: free again, as a message hash, claimed once.
	if err := d.Claims().Delete(ctx, q, a.ID); err != nil {
		t.Fatal(err)
	}
	if n := msgKeys(); n != 1 {
		t.Fatalf("%d message keys after a release, want 1", n)
	}
	b := claim(1, time.Minute)
	if b.Messages[0].ID != a.Messages[1].ID || b.Messages[0].ClaimCount != 2 {
		t.Fatalf("the next claim took %s (count %d), want the released %s (count 2)",
			b.Messages[0].ID, b.Messages[0].ClaimCount, a.Messages[1].ID)
	}
	// Lapsed: the same, once a call runs the cleanup.
	c := claim(1, time.Minute)
	clock.Advance(2 * time.Minute)
	if _, err := d.Queues().Stats(ctx, q); err != nil {
		t.Fatal(err)
	}
	got, err = d.Messages().Get(ctx, q, c.Messages[0].ID)
	if err != nil || got.ClaimID != "" || got.ClaimCount != 1 {
		t.Fatalf("message of a lapsed claim: %+v, %v; want free, count 1", got, err)
	}
	// A claim that outlives the entry raises its expiry as a message hash:
	// the messages of the lapsed claims it takes are hashes already, the
	// third an entry.
	keys := msgKeys()
	long := claim(3, 2*time.Hour)
	if n := msgKeys(); n != keys+1 {
		t.Fatalf("%d message keys after a claim that outlives its messages, want %d", n, keys+1)
	}
	got, err = d.Messages().Get(ctx, q, long.Messages[2].ID)
	if err != nil || got.ClaimID != long.ID || got.Created.Add(got.TTL).Before(clock.Now().Add(2*time.Hour+time.Minute)) {
		t.Fatalf("message of a long claim: %+v, %v; want it held and living past the claim and its grace", got, err)
	}
}
