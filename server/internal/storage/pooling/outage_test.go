package pooling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestPoolOutage kills one of three Redis pools (append-only, fsync always)
// mid-test: its queues answer Unavailable while the other pools keep
// serving, and after a restart every acknowledged message is back.
func TestPoolOutage(t *testing.T) {
	ctx := context.Background()
	b := startBackends(t, 3, false, testutil.RedisOptions{Persistent: true})
	b.register(t)
	d := openPooled(t, b.catalogURI, storage.Options{})
	cat := openCatalog(t, b.catalogURI)

	const queues = 30
	acked := map[storage.QueueRef][]string{}
	placed := map[storage.QueueRef]string{}
	perPool := map[string]int{}
	post := func(q storage.QueueRef, n int) ([]string, error) {
		msgs := make([]storage.NewMessage, n)
		for i := range msgs {
			msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%s-%d"`, q.Name, i))}
		}
		return d.Messages().Post(ctx, q, "producer", msgs)
	}
	for i := 0; i < queues; i++ {
		q := storage.QueueRef{Project: "outage", Name: fmt.Sprintf("q%02d", i)}
		ids, err := post(q, 5)
		if err != nil {
			t.Fatalf("post to %v: %v", q, err)
		}
		acked[q] = ids
		if placed[q], err = cat.Locate(ctx, q); err != nil || placed[q] == "" {
			t.Fatalf("placement of %v: %q %v", q, placed[q], err)
		}
		perPool[placed[q]]++
	}
	if len(perPool) != 3 {
		t.Fatalf("30 queues used pools %v; the test needs all three", perPool)
	}

	const victim = "redis2"
	b.redis[1].Kill()
	for q, pool := range placed {
		ids, err := post(q, 2)
		if pool == victim {
			if !storage.Is(err, storage.Unavailable) {
				t.Errorf("post to %v on the dead pool: %v, want Unavailable", q, err)
			}
			if _, err := d.Queues().Stats(ctx, q); !storage.Is(err, storage.Unavailable) {
				t.Errorf("stats of %v on the dead pool: %v, want Unavailable", q, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("post to %v on live pool %s: %v", q, pool, err)
			continue
		}
		acked[q] = append(acked[q], ids...)
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1})
		if err != nil || len(c.Messages) != 1 {
			t.Errorf("claim on live pool %s: %+v %v", pool, c, err)
			continue
		}
		if err := d.Claims().Delete(ctx, q, c.ID); err != nil {
			t.Errorf("release on live pool %s: %v", pool, err)
		}
	}
	if _, err := d.Queues().List(ctx, "outage", storage.ListQueuesOptions{Limit: 100}); err != nil {
		t.Errorf("queue listing while one pool is down: %v", err)
	}

	b.redis[1].Restart(t)
	for q, want := range acked {
		var got map[string]bool
		deadline := time.Now().Add(15 * time.Second)
		for {
			var err error
			got, err = allMessages(ctx, d, q)
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Fatalf("%v after restart: %v", q, err)
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, id := range want {
			if !got[id] {
				t.Errorf("acknowledged message %s of %v (pool %s) lost", id, q, placed[q])
			}
		}
	}
	for q := range placed {
		if err := d.Queues().Delete(ctx, q); err != nil {
			t.Errorf("delete %v: %v", q, err)
		}
	}
}

// allMessages pages through every live message of q.
func allMessages(ctx context.Context, d storage.Driver, q storage.QueueRef) (map[string]bool, error) {
	out := map[string]bool{}
	marker := ""
	for page := 0; page < 100; page++ {
		ms, next, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Marker: marker, Limit: 20, Echo: true, IncludeClaimed: true, IncludeDelayed: true})
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out[m.ID] = true
		}
		if next == "" || len(ms) == 0 {
			return out, nil
		}
		marker = next
	}
	return out, nil
}
