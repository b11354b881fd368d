package catalog_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// TestMigrationRecord walks a move's record through every state change on
// both management stores, with two catalog clients standing for two server
// replicas.
func TestMigrationRecord(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		mustPool(t, a, "p1", 100)
		mustPool(t, a, "p2", 0)
		mustPool(t, a, "p3", 0)
		qq := q(1)
		if _, _, err := a.StartMigration(ctx, qq, "p2", "A", time.Minute); !storage.Is(err, storage.NotFound) {
			t.Fatalf("moving an unplaced queue: %v, want NotFound", err)
		}
		if p, err := a.Assign(ctx, qq, ""); err != nil || p != "p1" {
			t.Fatalf("placed on %q (%v), want p1 (the only pool of weight > 0)", p, err)
		}
		if _, _, err := a.StartMigration(ctx, qq, "p1", "A", time.Minute); !storage.Is(err, storage.Invalid) {
			t.Errorf("moving to the pool it is on: %v, want Invalid", err)
		}
		if _, _, err := a.StartMigration(ctx, qq, "nope", "A", time.Minute); !storage.Is(err, storage.Invalid) {
			t.Errorf("moving to an unknown pool: %v, want Invalid", err)
		}
		if _, err := a.Store().GetMigration(ctx, qq); !storage.Is(err, storage.NotFound) {
			t.Errorf("a refused move left a record: %v", err)
		}
		m, created, err := a.StartMigration(ctx, qq, "p2", "A", time.Minute)
		if err != nil || !created || m.From != "p1" || m.To != "p2" || m.State != catalog.StateSealing || m.Owner != "A" {
			t.Fatalf("start: %+v created=%v err=%v", m, created, err)
		}
		// Same target again: the same move, not a new one.
		again, created, err := b.StartMigration(ctx, qq, "p2", "B", time.Minute)
		if err != nil || created || again.Owner != "A" || !again.Started.Equal(m.Started) {
			t.Errorf("same move again: %+v created=%v err=%v", again, created, err)
		}
		if _, _, err := b.StartMigration(ctx, qq, "p3", "B", time.Minute); !storage.Is(err, storage.Conflict) {
			t.Errorf("another target while moving: %v, want Conflict", err)
		}
		// The other replica's cache learns of the move within its poll.
		waitFor(t, func() bool { got, ok := b.Migration(qq); return ok && got.To == "p2" })

		// The lease: B cannot take a live lease, A's own renewal works.
		now := time.Now()
		if _, err := b.Store().LeaseMigration(ctx, qq, "B", now, now.Add(time.Minute)); !storage.Is(err, storage.Conflict) {
			t.Errorf("B took A's live lease: %v", err)
		}
		if _, err := a.Store().LeaseMigration(ctx, qq, "A", now, now.Add(50*time.Millisecond)); err != nil {
			t.Fatalf("A renews: %v", err)
		}
		m.State, m.Moved, m.Batches, m.Remaining, m.Lease = catalog.StateMoving, 10, 1, 5, now.Add(50*time.Millisecond)
		if err := a.Store().UpdateMigration(ctx, m); err != nil {
			t.Fatalf("A updates: %v", err)
		}
		waitFor(t, func() bool { got, _ := b.Migration(qq); return got.State == catalog.StateMoving })
		// A's lease lapses (its replica died): B takes over, A is locked out.
		later := now.Add(time.Second)
		took, err := b.Store().LeaseMigration(ctx, qq, "B", later, later.Add(time.Minute))
		if err != nil || took.Owner != "B" || took.Moved != 10 || took.State != catalog.StateMoving {
			t.Fatalf("B takes the expired lease: %+v %v", took, err)
		}
		m.Moved = 11
		if err := a.Store().UpdateMigration(ctx, m); !storage.Is(err, storage.Conflict) {
			t.Errorf("A updates after losing the lease: %v, want Conflict", err)
		}
		if err := a.Store().SwitchMigration(ctx, qq, "A", time.Now()); !storage.Is(err, storage.Conflict) {
			t.Errorf("A switches after losing the lease: %v, want Conflict", err)
		}
		took.State = catalog.StateDone
		if err := b.Store().UpdateMigration(ctx, took); !storage.Is(err, storage.Invalid) {
			t.Errorf("done by update: %v, want Invalid", err)
		}
		if err := b.Store().SwitchMigration(ctx, qq, "B", time.Now()); err != nil {
			t.Fatalf("switch: %v", err)
		}
		if err := b.Store().SwitchMigration(ctx, qq, "B", time.Now()); err != nil {
			t.Errorf("switch again: %v", err)
		}
		for _, c := range []*catalog.Catalog{a, b} {
			waitFor(t, func() bool { p, _ := c.Locate(ctx, qq); _, moving := c.Migration(qq); return p == "p2" && !moving })
		}
		done, err := a.Store().GetMigration(ctx, qq)
		if err != nil || done.State != catalog.StateDone || done.Finished.IsZero() || done.Moved != 10 {
			t.Errorf("after switch: %+v %v", done, err)
		}
		if n, _ := a.Store().QueueCount(ctx, "p2"); n != 1 {
			t.Errorf("p2 counts %d queues, want 1", n)
		}
		if n, _ := a.Store().QueueCount(ctx, "p1"); n != 0 {
			t.Errorf("p1 counts %d queues, want 0", n)
		}
		if active, err := a.Store().ActiveMigrations(ctx); err != nil || len(active) != 0 {
			t.Errorf("active after done: %v %v", active, err)
		}
		// It may move again, back; the new record replaces the old.
		back, created, err := a.StartMigration(ctx, qq, "p1", "A", time.Minute)
		if err != nil || !created || back.From != "p2" || back.Moved != 0 {
			t.Errorf("move back: %+v %v %v", back, created, err)
		}
		// Failing (rolled back) ends it without a switch.
		back.State, back.Error = catalog.StateFailed, "seal: unreachable"
		if err := a.Store().UpdateMigration(ctx, back); err != nil {
			t.Fatal(err)
		}
		if p, _ := a.Store().Lookup(ctx, qq); p != "p2" {
			t.Errorf("a failed move changed the placement to %q", p)
		}
	})
}

// placedOnP1 opens two catalog clients of uri, as two replicas hold them,
// registers pool p1 and the empty pools targets, and places queues 0 to
// n-1 on p1.
func placedOnP1(t *testing.T, uri string, n int, targets ...string) (a, b *catalog.Catalog) {
	t.Helper()
	a, b = open(t, uri), open(t, uri)
	mustPool(t, a, "p1", 100)
	for _, p := range targets {
		mustPool(t, a, p, 0)
	}
	for i := 0; i < n; i++ {
		if _, err := a.Assign(context.Background(), q(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestConcurrentStartsAgree: replicas racing to start moves of the same
// queues to different targets; exactly one target wins per queue. Then
// again, once every queue's move has ended (its record stays, and a new
// move replaces it).
func TestConcurrentStartsAgree(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		const n = 30
		a, b := placedOnP1(t, uri, n, "p2", "p3")
		for round := range 2 {
			var wins [2]int
			var wg sync.WaitGroup
			for side, c := range []*catalog.Catalog{a, b} {
				wg.Go(func() {
					for i := 0; i < n; i++ {
						_, created, err := c.StartMigration(ctx, q(i), fmt.Sprintf("p%d", side+2), "x", time.Minute)
						if err != nil && !storage.Is(err, storage.Conflict) {
							t.Error(err)
						}
						if created {
							wins[side]++
						}
					}
				})
			}
			wg.Wait()
			if wins[0]+wins[1] != n {
				t.Errorf("round %d: %v moves started for %d queues", round, wins, n)
			}
			active, err := a.Store().ActiveMigrations(ctx)
			if err != nil || len(active) != n {
				t.Fatalf("round %d: %d active moves (%v), want %d", round, len(active), err, n)
			}
			for _, m := range active {
				m.State, m.Error = catalog.StateFailed, "ended by the test"
				if err := a.Store().UpdateMigration(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestConcurrentTakeoversAgree: replicas racing to take over moves whose
// owner's lease lapsed (its replica died); exactly one takes each, and it
// is the one the record names. Two that both believed they held a move
// would run it side by side.
func TestConcurrentTakeoversAgree(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		const n = 30
		a, b := placedOnP1(t, uri, n, "p2")
		for i := 0; i < n; i++ {
			if _, _, err := a.StartMigration(ctx, q(i), "p2", "dead", time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		later := time.Now().Add(time.Second)
		owners := []string{"B", "C"}
		var took [2][n]bool
		var wg sync.WaitGroup
		for side, c := range []*catalog.Catalog{a, b} {
			wg.Go(func() {
				for i := 0; i < n; i++ {
					m, err := c.Store().LeaseMigration(ctx, q(i), owners[side], later, later.Add(time.Minute))
					switch {
					case err == nil:
						took[side][i] = true
						if m.Owner != owners[side] {
							t.Errorf("queue %d: %s's takeover answered a record owned by %q", i, owners[side], m.Owner)
						}
					case !storage.Is(err, storage.Conflict):
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for i := 0; i < n; i++ {
			m, err := a.Store().GetMigration(ctx, q(i))
			if err != nil {
				t.Fatal(err)
			}
			winner := slices.Index(owners, m.Owner)
			if winner < 0 || !took[winner][i] || took[1-winner][i] {
				t.Errorf("queue %d: B took it %v, C took it %v; the record names %q", i, took[0][i], took[1][i], m.Owner)
			}
		}
	})
}

// TestQueuesOnPages lists a pool's queues a page at a time for every page
// size from 1 to past the total: the pages are disjoint, ordered and
// together exactly the pool's queues.
func TestQueuesOnPages(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		c := open(t, uri)
		mustPool(t, c, "big", 100)
		mustPool(t, c, "small", 100)
		want := map[string][]string{}
		for i := 0; i < 40; i++ {
			qq := storage.QueueRef{Project: fmt.Sprintf("proj%d", i%3), Name: fmt.Sprintf("queue-%02d", i)}
			p, err := c.Assign(ctx, qq, "")
			if err != nil {
				t.Fatal(err)
			}
			want[p] = append(want[p], qq.Project+"/"+qq.Name)
		}
		for pool, names := range want {
			sort.Strings(names)
			for limit := 1; limit <= len(names)+1; limit += 3 {
				var got []string
				marker := ""
				for pages := 0; pages <= len(names)+1; pages++ {
					page, next, err := c.QueuesOn(ctx, pool, marker, limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > limit {
						t.Fatalf("page of %d with limit %d", len(page), limit)
					}
					for _, qq := range page {
						got = append(got, qq.Project+"/"+qq.Name)
					}
					if next == "" {
						break
					}
					marker = next
				}
				if fmt.Sprint(got) != fmt.Sprint(names) {
					t.Fatalf("pool %s limit %d: got %v, want %v", pool, limit, got, names)
				}
			}
		}
		if _, _, err := c.QueuesOn(ctx, "big", "!!not-base64", 5); !storage.Is(err, storage.Invalid) {
			t.Errorf("bad marker: %v", err)
		}
	})
}

// waitFor polls cond for up to 5 s (a catalog poll is 50 ms here).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5 s")
}
