package pooling_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/pooling"
)

// TestDeadLetterQueueMoves: a queue and its dead-letter queue share a pool
// (dead-lettering happens inside one backend). Moving either one must not
// break claims on the queue, nor lose or strand a message: while the two
// are apart, exhausted messages stay claimable; moving the queue takes its
// dead-letter queue along; once together again, dead-lettering resumes.
func TestDeadLetterQueueMoves(t *testing.T) {
	ctx := context.Background()
	catalogURI, _ := movePools(t, "redis", "redis")
	d := openPooled(t, catalogURI, storage.Options{})
	mover := d.StartMover(pooling.MoverOptions{Lease: time.Second, Scan: 200 * time.Millisecond})
	st := d.Catalog().Store()

	withDLQ := func(name, dlq string) (storage.QueueRef, *storage.DeadLetter) {
		q := storage.QueueRef{Project: "dl", Name: name}
		meta := storage.Metadata{"_dead_letter_queue": dlq, "_max_claims_count": 1.0}
		if _, err := d.Queues().Create(ctx, q, meta); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return q, &storage.DeadLetter{MaxClaimCount: 1, Queue: dlq}
	}
	post := func(q storage.QueueRef) string {
		ids, err := d.Messages().Post(ctx, q, "p", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}})
		if err != nil {
			t.Fatalf("post to %s: %v", q.Name, err)
		}
		return ids[0]
	}
	// exhaust claims q's one message once and releases it: its next claim
	// under the policy dead-letters it.
	exhaust := func(q storage.QueueRef, dl *storage.DeadLetter) {
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 10, DeadLetter: dl})
		if err != nil || len(c.Messages) != 1 {
			t.Fatalf("first claim on %s: %+v, %v", q.Name, c, err)
		}
		if err := d.Claims().Delete(ctx, q, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	move := func(q storage.QueueRef) catalog.Migration {
		t.Helper()
		if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
			t.Fatalf("migrate %s: %v", q.Name, err)
		}
		var m catalog.Migration
		waitUntil(t, 30*time.Second, func() bool { m, _ = st.GetMigration(ctx, q); return m.State == catalog.StateDone })
		return m
	}
	dlqHolds := func(dlq, id string) bool {
		m, err := d.Messages().Get(ctx, storage.QueueRef{Project: "dl", Name: dlq}, id)
		return err == nil && m.ID == id
	}

	// The dead-letter queue (placed with its queue, not yet created: no
	// message reached it) moves alone: claims on the queue go on, and the
	// exhausted message stays claimable rather than failing or vanishing.
	work, dl := withDLQ("work", "dead")
	id := post(work)
	exhaust(work, dl)
	move(storage.QueueRef{Project: "dl", Name: "dead"})
	c, err := d.Claims().Create(ctx, work, storage.ClaimOptions{TTL: time.Minute, Limit: 10, DeadLetter: dl})
	if err != nil || len(c.Messages) != 1 || c.Messages[0].ID != id {
		t.Fatalf("claim while the dead-letter queue is on another pool: %+v, %v; want the exhausted message kept", c, err)
	}
	if err := d.Claims().Delete(ctx, work, c.ID); err != nil {
		t.Fatal(err)
	}
	// Its other metadata can still change meanwhile.
	if _, err := d.Queues().UpdateMetadata(ctx, work, func(cur storage.Metadata) (storage.Metadata, error) {
		next := storage.Metadata{"note": "apart"}
		for k, v := range cur {
			next[k] = v
		}
		return next, nil
	}); err != nil {
		t.Fatalf("metadata update while apart from the dead-letter queue: %v", err)
	}
	// The queue follows it: together again, the exhausted message goes to
	// the dead-letter queue.
	move(work)
	if c, err := d.Claims().Create(ctx, work, storage.ClaimOptions{TTL: time.Minute, Limit: 10, DeadLetter: dl}); err != nil || len(c.Messages) != 0 {
		t.Fatalf("claim once together on dst: %+v, %v; want the message dead-lettered", c, err)
	}
	if !dlqHolds("dead", id) {
		t.Errorf("dead-letter queue does not hold %s after the queue followed it", id)
	}

	// A queue moved with its dead-letter queue still on the source takes it
	// along.
	jobs, dl2 := withDLQ("jobs", "jobs-dead")
	id = post(jobs)
	exhaust(jobs, dl2)
	rec := move(jobs)
	dead2 := storage.QueueRef{Project: "dl", Name: "jobs-dead"}
	if p, _ := d.Catalog().Locate(ctx, dead2); p != "dst" {
		t.Fatalf("the dead-letter queue is on %q after its queue moved to dst (move %+v)", p, rec)
	}
	waitUntil(t, 30*time.Second, func() bool { m, _ := st.GetMigration(ctx, dead2); return m.State == catalog.StateDone })
	if c, err := d.Claims().Create(ctx, jobs, storage.ClaimOptions{TTL: time.Minute, Limit: 10, DeadLetter: dl2}); err != nil || len(c.Messages) != 0 {
		t.Fatalf("claim after the move: %+v, %v; want the message dead-lettered", c, err)
	}
	if !dlqHolds("jobs-dead", id) {
		t.Errorf("dead-letter queue does not hold %s after both moved", id)
	}
}
