package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// TestPostAloneBoundsIndexes: a queue only ever posted to (nobody claims,
// lists or counts) must not keep the index entries of expired messages:
// the post script's expiry step, run once per 16 sequence numbers, drops
// them. Batch sizes and TTLs are drawn at random; once every earlier
// message has expired, posting 16 more sequence numbers leaves only live
// entries.
func TestPostAloneBoundsIndexes(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	clock := storagetest.NewClock()
	d := openAt(t, r.URL, clock)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, uint64(time.Now().UnixNano())))
	for round := 0; round < 5; round++ {
		q := queueRef("p", "bounded")
		posted := 0
		for posted < 300 {
			n := 1 + rng.IntN(20)
			msgs := make([]storage.NewMessage, n)
			for i := range msgs {
				msgs[i] = storage.NewMessage{TTL: time.Duration(60+rng.IntN(60)) * time.Second, Body: json.RawMessage(`1`)}
			}
			if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
				t.Fatal(err)
			}
			posted += n
		}
		clock.Advance(3 * time.Minute) // every message so far has expired
		live := 0
		for live < 16 {
			n := 1 + rng.IntN(3)
			if _, err := post(t, d, q, n, time.Hour); err != nil {
				t.Fatal(err)
			}
			live += n
		}
		// The stream area: the live entries, and no expiry left out of
		// order (:xe): every live one expires after all earlier ones.
		want := map[string]int{":x": live, ":xe": 0, ":ids": 0, ":exp": 0, ":rdy": 0}
		for idx, n := range want {
			var got int64
			if idx == ":x" {
				got, _ = d.c.XLen(ctx, scope(q)+idx).Result()
			} else {
				got, _ = d.c.ZCard(ctx, scope(q)+idx).Result()
			}
			if got != int64(n) {
				t.Fatalf("round %d: %s holds %d entries after posting alone, want %d", round, idx, got, n)
			}
		}
		if err := d.Queues().Delete(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostGivesRecreatedIndexesATTL: consumers empty a queue's indexes
// (Redis deletes an empty sorted set), the next post creates them again,
// and they must carry the queue's TTL again, or an abandoned queue would
// keep them for ever.
func TestPostGivesRecreatedIndexesATTL(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	q := queueRef("p", "drained")
	hasTTL := func(cycle int, keys ...string) {
		t.Helper()
		for _, idx := range keys {
			if ttl, _ := d.c.PTTL(ctx, scope(q)+idx).Result(); ttl <= 0 {
				t.Fatalf("cycle %d: %s has no TTL (%v)", cycle, idx, ttl)
			}
		}
	}
	for cycle := 0; cycle < 3; cycle++ {
		if _, err := post(t, d, q, 2, time.Minute); err != nil {
			t.Fatal(err)
		}
		hasTTL(cycle, ":x")
		if delay := []storage.NewMessage{{TTL: time.Minute, Delay: time.Minute, Body: json.RawMessage(`1`)}}; cycle == 1 {
			if _, err := d.Messages().Post(ctx, q, "c", delay); err != nil {
				t.Fatal(err)
			}
			if ttl, _ := d.c.PTTL(ctx, scope(q)+":dly").Result(); ttl <= 0 {
				t.Fatalf(":dly has no TTL (%v)", ttl)
			}
		}
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		// Claimed entries of the stream area became message hashes.
		hasTTL(cycle, ":ids", ":exp", ":held", ":cl")
		for _, m := range c.Messages {
			if err := d.Messages().Delete(ctx, q, m.ID, c.ID); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := d.c.Exists(ctx, scope(q)+":rdy").Result(); n != 0 {
			t.Fatalf("cycle %d: :rdy still exists after the queue was drained", cycle)
		}
		// A delayed message keeps :ids and :exp alive; drop it for the next cycle.
		if err := d.Queues().Purge(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFreedMessagesKeepIndexTTL: a lapsed or released claim puts its
// messages back into :rdy, which the claim had emptied (so Redis deleted
// it); the recreated key must get the queue's TTL again.
func TestFreedMessagesKeepIndexTTL(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	clock := storagetest.NewClock()
	ctx := context.Background()
	d := openAt(t, r.URL, clock)
	for _, release := range []bool{false, true} {
		q := queueRef("p", fmt.Sprintf("freed-%v", release))
		if _, err := post(t, d, q, 2, time.Hour); err != nil {
			t.Fatal(err)
		}
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10})
		if err != nil || len(c.Messages) != 2 {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		if n, _ := d.c.Exists(ctx, scope(q)+":rdy").Result(); n != 0 {
			t.Fatal(":rdy survived a claim of every message")
		}
		if release {
			err = d.Claims().Delete(ctx, q, c.ID)
		} else {
			clock.Advance(2 * time.Minute)
			_, err = d.Queues().Stats(ctx, q) // applies the lapse
		}
		if err != nil {
			t.Fatal(err)
		}
		if ttl, _ := d.c.PTTL(ctx, scope(q)+":rdy").Result(); ttl <= 0 {
			t.Errorf("release=%v: :rdy holds the freed messages without a TTL (%v)", release, ttl)
		}
	}
}
