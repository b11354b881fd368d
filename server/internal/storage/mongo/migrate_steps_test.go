package mongo_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

func postN(t *testing.T, d storage.Driver, q storage.QueueRef, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		got, err := d.Messages().Post(context.Background(), q, "poster", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`{"n":1}`)}})
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// TestMoveStepsAreIdempotent repeats every step, as a mover that crashed
// and resumed does, and checks the refusals: a second target, an unseal
// after a batch was taken, a finish with messages left, a post or metadata
// write on a sealed queue, and a re-import of a message deleted since.
func TestMoveStepsAreIdempotent(t *testing.T) {
	p := openPair(t)
	ctx := context.Background()
	q := storage.QueueRef{Project: "steps", Name: "q"}
	ids := postN(t, p.src, q, 5)
	if _, _, err := p.src.Subscriptions().Create(ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:1/hook", TTL: time.Hour}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}

	s1, err := p.from.Seal(ctx, q, targetName)
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	if s2, err := p.from.Seal(ctx, q, targetName); err != nil || !reflect.DeepEqual(s1, s2) {
		t.Fatalf("second seal: %+v, %v; want %+v", s2, err, s1)
	}
	if _, err := p.from.Seal(ctx, q, "pool-c"); !storage.Is(err, storage.Conflict) {
		t.Fatalf("seal to another target: %v, want Conflict", err)
	}
	if err := p.src.Queues().SetMetadata(ctx, q, storage.Metadata{"a": 1.0}); !isMoved(err) {
		t.Fatalf("metadata write on a sealed queue: %v, want Moved", err)
	}
	// Rolled back before anything was taken: the queue serves posts again.
	if err := p.from.Unseal(ctx, q); err != nil {
		t.Fatalf("unseal: %v", err)
	}
	ids = append(ids, postN(t, p.src, q, 1)...)
	if s1, err = p.from.Seal(ctx, q, targetName); err != nil {
		t.Fatalf("seal again: %v", err)
	}

	if err := p.to.Prepare(ctx, q, s1.Metadata, s1.Seq); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	// Metadata a client sets on the target after the seal stands.
	clientMeta := storage.Metadata{"set": "on target"}
	if err := p.dst.Queues().SetMetadata(ctx, q, clientMeta); err != nil {
		t.Fatalf("metadata on target: %v", err)
	}
	if err := p.to.Prepare(ctx, q, storage.Metadata{"stale": true}, s1.Seq); err != nil {
		t.Fatalf("second prepare: %v", err)
	}
	if got, _ := p.dst.Queues().GetMetadata(ctx, q); !reflect.DeepEqual(got, clientMeta) {
		t.Fatalf("target metadata %v after a second prepare, want %v", got, clientMeta)
	}

	b, err := p.from.Take(ctx, q, 2)
	if err != nil || len(b.Messages) != 2 || b.Messages[0].ID != ids[5] || b.Messages[1].ID != ids[4] {
		t.Fatalf("take: %+v, %v; want the newest two, newest first", b, err)
	}
	if again, err := p.from.Take(ctx, q, 2); err != nil || !reflect.DeepEqual(again, b) {
		t.Fatalf("second take: %+v, %v; want the batch in transit", again, err)
	}
	if err := p.from.Unseal(ctx, q); !storage.Is(err, storage.Conflict) {
		t.Fatalf("unseal after take: %v, want Conflict", err)
	}
	if err := p.from.Finish(ctx, q, time.Hour); !storage.Is(err, storage.Conflict) {
		t.Fatalf("finish with messages left: %v, want Conflict", err)
	}
	for i := 0; i < 2; i++ {
		if err := p.to.Import(ctx, q, b); err != nil {
			t.Fatalf("import %d: %v", i, err)
		}
	}
	if got := all(t, p.dst, q); len(got) != 2 {
		t.Fatalf("target holds %d messages after two imports, want 2", len(got))
	}
	// Deleted on the target, then imported again by a resumed mover.
	if err := p.dst.Messages().Delete(ctx, q, ids[5], ""); err != nil {
		t.Fatalf("delete on target: %v", err)
	}
	if err := p.to.Import(ctx, q, b); err != nil {
		t.Fatalf("import after delete: %v", err)
	}
	if _, err := p.dst.Messages().Get(ctx, q, ids[5]); !storage.Is(err, storage.NotFound) {
		t.Fatalf("a deleted message came back with a re-import: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := p.from.Settle(ctx, q, b); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	if b, err := p.from.InTransit(ctx, q); err != nil || !b.Empty() {
		t.Fatalf("in transit after settle: %+v, %v", b, err)
	}
	// The rest, in one batch, and the end.
	rest, err := p.from.Take(ctx, q, 10)
	if err != nil || len(rest.Messages) != 4 {
		t.Fatalf("take the rest: %+v, %v", rest, err)
	}
	if err := p.to.Import(ctx, q, rest); err != nil {
		t.Fatalf("import: %v", err)
	}
	if err := p.from.Settle(ctx, q, rest); err != nil {
		t.Fatalf("settle: %v", err)
	}
	if b, err := p.from.Take(ctx, q, 10); err != nil || !b.Empty() {
		t.Fatalf("take from an empty source: %+v, %v", b, err)
	}
	for i := 0; i < 2; i++ {
		if err := p.from.Finish(ctx, q, time.Hour); err != nil {
			t.Fatalf("finish %d: %v", i, err)
		}
		if err := p.to.Done(ctx, q); err != nil {
			t.Fatalf("done %d: %v", i, err)
		}
	}
	var order []string
	for _, m := range all(t, p.dst, q) {
		order = append(order, m.ID)
	}
	if want := []string{ids[0], ids[1], ids[2], ids[3], ids[4]}; !reflect.DeepEqual(order, want) {
		t.Fatalf("target order %v, want %v", order, want)
	}
	for name, err := range map[string]error{
		"post": func() error {
			_, err := p.src.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}})
			return err
		}(),
		"claim": func() error {
			_, err := p.src.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 1})
			return err
		}(),
		"stats":  func() error { _, err := p.src.Queues().Stats(ctx, q); return err }(),
		"meta":   func() error { _, err := p.src.Queues().GetMetadata(ctx, q); return err }(),
		"exists": func() error { _, err := p.src.Queues().Exists(ctx, q); return err }(),
	} {
		if !isMoved(err) {
			t.Errorf("%s on a finished source: %v, want Moved(%s)", name, err, targetName)
		}
	}
	qs, err := p.src.Queues().List(ctx, q.Project, storage.ListQueuesOptions{Limit: 10})
	if err != nil || len(qs) != 0 {
		t.Fatalf("finished source lists %v, %v; want none", qs, err)
	}
	// Only the tombstone is left of the queue on the source.
	left, err := p.src.(storage.Inspector).Leftovers(ctx, q.Project)
	if err != nil || len(left) != 1 {
		t.Fatalf("finished source still holds %v, %v; want only the tombstone", left, err)
	}
	// Once the tombstone ran out the name is free again here.
	p.clock.Advance(time.Hour + time.Second)
	if ok, err := p.src.Queues().Exists(ctx, q); err != nil || ok {
		t.Fatalf("exists after the tombstone: %v, %v", ok, err)
	}
	postN(t, p.src, q, 1)
}

// TestMoveBackAfterFinish moves a queue away and back again: the target of
// the second move holds the tombstone of the first, which Prepare replaces.
func TestMoveBackAfterFinish(t *testing.T) {
	p := openPair(t)
	ctx := context.Background()
	q := storage.QueueRef{Project: "back", Name: "q"}
	ids := postN(t, p.src, q, 3)
	move := func(from, to storage.MigrationStore, target string) {
		t.Helper()
		s, err := from.Seal(ctx, q, target)
		if err != nil {
			t.Fatalf("seal: %v", err)
		}
		if err := to.Prepare(ctx, q, s.Metadata, s.Seq); err != nil {
			t.Fatalf("prepare: %v", err)
		}
		for i := 0; i < 10; i++ {
			b, err := from.Take(ctx, q, 2)
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if b.Empty() {
				break
			}
			if err := to.Import(ctx, q, b); err != nil {
				t.Fatalf("import: %v", err)
			}
			if err := from.Settle(ctx, q, b); err != nil {
				t.Fatalf("settle: %v", err)
			}
		}
		if err := from.Finish(ctx, q, time.Hour); err != nil {
			t.Fatalf("finish: %v", err)
		}
		if err := to.Done(ctx, q); err != nil {
			t.Fatalf("done: %v", err)
		}
	}
	move(p.from, p.to, targetName)
	move(p.to, p.from, "pool-a")
	var got []string
	for _, m := range all(t, p.src, q) {
		got = append(got, m.ID)
	}
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("back on the source: %v, want %v", got, ids)
	}
	if _, err := p.dst.Queues().Exists(ctx, q); !storage.Is(err, storage.Conflict) {
		t.Fatalf("the target of the first move: %v, want Moved", err)
	}
}

// TestMoveUnderClaimers moves a queue while workers claim and delete
// through both backends the way the pooled driver routes a moving queue
// (claims on the source first, topping up from the target; Moving retried;
// a delete the source answers Moved is sent to the target) and a poster
// posts to the target. Every message must be delivered exactly once: none
// held by two claims, none left behind, none lost.
func TestMoveUnderClaimers(t *testing.T) {
	p := openPair(t)
	ctx := context.Background()
	q := storage.QueueRef{Project: "busy", Name: "q"}
	want := map[string]bool{}
	for _, id := range postN(t, p.src, q, 40) {
		want[id] = true
	}
	var (
		mu       sync.Mutex
		holder   = map[string]string{} // message -> claim that got it
		dup      []string
		deleted  = map[string]bool{}
		moveDone = make(chan struct{})
		errs     = make(chan error, 16)
	)
	s, err := p.from.Seal(ctx, q, targetName)
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	if err := p.to.Prepare(ctx, q, s.Metadata, s.Seq); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	go func() { // the mover
		defer close(moveDone)
		for i := 0; i < 100; i++ {
			b, err := p.from.Take(ctx, q, 3)
			if err != nil {
				errs <- err
				return
			}
			if b.Empty() {
				errs <- p.from.Finish(ctx, q, time.Hour)
				return
			}
			if err := p.to.Import(ctx, q, b); err != nil {
				errs <- err
				return
			}
			if err := p.from.Settle(ctx, q, b); err != nil {
				errs <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a poster on the target
		defer wg.Done()
		for i := 0; i < 10; i++ {
			ids, err := p.dst.Messages().Post(ctx, q, "poster", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`2`)}})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			want[ids[0]] = true
			mu.Unlock()
		}
	}()
	claim := func(limit int) ([]storage.Message, error) {
		for attempt := 0; attempt < 200; attempt++ {
			c, err := p.src.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Hour, Limit: limit})
			if isMoving(err) {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if err != nil && !isMoved(err) {
				return nil, err
			}
			got := c.Messages
			if len(got) < limit {
				more, err := p.dst.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Hour, Limit: limit - len(got)})
				if err != nil {
					return nil, err
				}
				got = append(got, more.Messages...)
			}
			return got, nil
		}
		return nil, storage.ErrMoving
	}
	del := func(m storage.Message) error {
		for attempt := 0; attempt < 200; attempt++ {
			err := p.src.Messages().Delete(ctx, q, m.ID, m.ClaimID)
			switch {
			case isMoving(err):
				time.Sleep(2 * time.Millisecond)
				continue
			case isMoved(err):
				return p.dst.Messages().Delete(ctx, q, m.ID, m.ClaimID)
			}
			return err
		}
		return storage.ErrMoving
	}
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for i := 0; i < 200 && idle < 3; i++ {
				got, err := claim(2)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					select {
					case <-moveDone:
						idle++
					default:
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				idle = 0
				for _, m := range got {
					mu.Lock()
					if prev, ok := holder[m.ID]; ok {
						dup = append(dup, m.ID+" in "+prev+" and "+m.ClaimID)
					}
					holder[m.ID] = m.ClaimID
					mu.Unlock()
					if err := del(m); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					deleted[m.ID] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	<-moveDone
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("during the move: %v", err)
		}
	}
	if len(dup) > 0 {
		t.Fatalf("delivered twice: %v", dup)
	}
	left := all(t, p.dst, q)
	for _, m := range left {
		t.Errorf("left on the target: %s (claim %q)", m.ID, m.ClaimID)
	}
	for id := range want {
		if !deleted[id] {
			t.Errorf("never delivered: %s", id)
		}
	}
	t.Logf("%d messages delivered once each across the move", len(deleted))
}
