package redis

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestFullShardCreate: on a Redis over its maxmemory, creating a queue
// that exists answers as it always does (not created, no error): it
// stores nothing, and clients PUT their queue before using it. A new
// queue is refused as Full.
func TestFullShardCreate(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{Args: []string{"--maxmemory-policy", "noeviction"}})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	q := queueRef("p", "have")
	if _, err := d.Queues().Create(ctx, q, storage.Metadata{"_default_message_ttl": 60}); err != nil {
		t.Fatal(err)
	}
	// Full for certain: a limit below what Redis uses at rest.
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr})
	defer c.Close()
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if created, err := d.Queues().Create(ctx, q, nil); created || err != nil {
		t.Fatalf("create of the existing queue while full: created %v, %v", created, err)
	}
	if meta, err := d.Queues().GetMetadata(ctx, q); err != nil || meta["_default_message_ttl"] == nil {
		t.Fatalf("metadata after the create while full: %v, %v", meta, err)
	}
	for _, what := range []struct {
		name string
		err  func() error
	}{
		{"create of a new queue", func() error { _, err := d.Queues().Create(ctx, queueRef("p", "new"), nil); return err }},
		{"post", func() error {
			_, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}})
			return err
		}},
	} {
		if err := what.err(); storage.KindOf(err) != storage.Full {
			t.Errorf("%s while full: %v, want full", what.name, err)
		}
	}
}

// TestFullShardDrains: a Redis at its maxmemory with noeviction (what the
// operator configures) refuses posts as Full, stores nothing of a refused
// batch, and keeps serving what drains it: every acknowledged message
// reads back, claims, deletes, pops and stats work while it is full, and
// posting resumes once consumers have deleted enough. Batch sizes, body
// sizes and which drain operation runs are drawn at random.
func TestFullShardDrains(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{Args: []string{
		"--maxmemory", "6mb", "--maxmemory-policy", "noeviction"}})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(57, seed))
	t.Logf("seed %d", seed)
	q := queueRef("p", "full")
	if _, err := d.Queues().Create(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	body := func() json.RawMessage {
		return json.RawMessage(`"` + strings.Repeat("x", 200+rng.IntN(1800)) + `"`)
	}
	acked := map[string]bool{}
	var refused error
	// 6 MB holds a few thousand such messages; the bound only stops a
	// Redis that never fills.
	for i := 0; i < 20000 && refused == nil; i++ {
		msgs := make([]storage.NewMessage, 1+rng.IntN(10))
		for j := range msgs {
			msgs[j] = storage.NewMessage{TTL: time.Hour, Body: body()}
		}
		ids, err := d.Messages().Post(ctx, q, "c", msgs)
		if err != nil {
			refused = err
			break
		}
		for _, id := range ids {
			acked[id] = true
		}
	}
	if refused == nil {
		t.Fatal("20000 posts into a 6 MB Redis were all accepted")
	}
	if k := storage.KindOf(refused); k != storage.Full {
		t.Fatalf("post into a full Redis: kind %v (%v), want full", k, refused)
	}
	if len(acked) < 100 {
		t.Fatalf("only %d messages fitted before the first refusal", len(acked))
	}
	// All or nothing: the refused batch left no message behind.
	st, err := d.Queues().Stats(ctx, q)
	if err != nil {
		t.Fatalf("stats while full: %v", err)
	}
	if st.Total != len(acked) {
		t.Fatalf("stats while full: %d messages, %d acknowledged", st.Total, len(acked))
	}
	// Every acknowledged message reads back while the shard is full.
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	for i := 0; i < len(ids); i += 20 {
		got, err := d.Messages().GetMany(ctx, q, ids[i:min(i+20, len(ids))])
		if err != nil {
			t.Fatalf("get while full: %v", err)
		}
		if len(got) != min(20, len(ids)-i) {
			t.Fatalf("get while full: %d of %d messages", len(got), min(20, len(ids)-i))
		}
	}
	if _, _, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true}); err != nil {
		t.Fatalf("list while full: %v", err)
	}
	// Drain with whatever consumers do, until a post is accepted again.
	drained := 0
	for round := 0; round < 2000; round++ {
		switch rng.IntN(3) {
		case 0: // claim, then delete with the claim id
			c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1 + rng.IntN(10)})
			if err != nil {
				t.Fatalf("claim while full: %v", err)
			}
			for _, m := range c.Messages {
				if err := d.Messages().Delete(ctx, q, m.ID, c.ID); err != nil {
					t.Fatalf("delete with claim while full: %v", err)
				}
				delete(acked, m.ID)
				drained++
			}
		case 1: // pop
			got, err := d.Messages().Pop(ctx, q, 1+rng.IntN(10))
			if err != nil {
				t.Fatalf("pop while full: %v", err)
			}
			for _, m := range got {
				delete(acked, m.ID)
				drained++
			}
		case 2: // delete many by id
			var batch []string
			n := 1 + rng.IntN(10)
			for id := range acked {
				if batch = append(batch, id); len(batch) == n {
					break
				}
			}
			if err := d.Messages().DeleteMany(ctx, q, batch, ""); err != nil {
				t.Fatalf("delete many while full: %v", err)
			}
			for _, id := range batch {
				delete(acked, id)
				drained++
			}
		}
		if drained < 50 {
			continue
		}
		if _, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); err == nil {
			t.Logf("posting resumed after %d of %d messages drained", drained, drained+len(acked))
			return
		} else if storage.KindOf(err) != storage.Full {
			t.Fatalf("post after draining %d: %v", drained, err)
		}
	}
	t.Fatalf("posting did not resume after %d messages drained", drained)
}
