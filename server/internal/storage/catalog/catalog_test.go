package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/testutil"
)

// stores runs fn against a Redis and a FerretDB management store.
func stores(t *testing.T, fn func(t *testing.T, uri string)) {
	t.Run("redis", func(t *testing.T) { fn(t, testutil.StartRedis(t, testutil.RedisOptions{}).URL) })
	t.Run("mongodb", func(t *testing.T) { fn(t, testutil.StartFerretDB(t).URI("catalog")) })
}

func open(t *testing.T, uri string) *catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	st, err := catalog.OpenStore(ctx, uri)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	c, err := catalog.New(ctx, st, catalog.Options{Refresh: 50 * time.Millisecond,
		Probe: func(context.Context, string) error { return nil }})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustPool(t *testing.T, c *catalog.Catalog, name string, weight int) {
	t.Helper()
	// A database of its own per name (nothing listens on port 1): the
	// catalog refuses two pools on one URI.
	uri := "redis://127.0.0.1:1/" + fmt.Sprint(crc32.ChecksumIEEE([]byte(name))%100000)
	if _, err := c.PutPool(context.Background(), catalog.Pool{Name: name, URI: uri, Weight: weight}, true); err != nil {
		t.Fatalf("put pool %s: %v", name, err)
	}
}

func q(i int) storage.QueueRef {
	return storage.QueueRef{Project: "proj", Name: fmt.Sprintf("queue-%04d", i)}
}

// TestPlacementFollowsWeights places 3000 queues over pools weighted
// 100:50:0. Expected shares 2/3 and 1/3; the stated tolerance is 5 points
// of the total (the binomial standard deviation is under 1 point), and the
// drained pool must receive nothing.
func TestPlacementFollowsWeights(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		c := open(t, uri)
		mustPool(t, c, "big", 100)
		mustPool(t, c, "small", 50)
		mustPool(t, c, "drained", 0)
		const n = 3000
		got := map[string]int{}
		for i := 0; i < n; i++ {
			p, err := c.Assign(ctx, q(i), "")
			if err != nil {
				t.Fatal(err)
			}
			got[p]++
		}
		if got["drained"] != 0 {
			t.Errorf("weight-0 pool received %d queues", got["drained"])
		}
		share := float64(got["big"]) / n
		if share < 2.0/3-0.05 || share > 2.0/3+0.05 {
			t.Errorf("big pool share %.3f (%v), want 0.667 ± 0.05", share, got)
		}
		if got["big"]+got["small"] != n {
			t.Errorf("placements %v do not add up to %d", got, n)
		}
		// Deleting a pool that holds queues names how many.
		err := c.DeletePool(ctx, "small")
		if !storage.Is(err, storage.Conflict) || !strings.Contains(err.Error(), fmt.Sprintf("%d queue", got["small"])) {
			t.Errorf("delete busy pool: %v", err)
		}
		if err := c.DeletePool(ctx, "drained"); err != nil {
			t.Errorf("delete empty pool: %v", err)
		}
	})
}

// TestConcurrentPlacementAgrees: two catalog clients, as two server
// processes would hold, race to place the same queues while proposing
// different pools; every queue ends up with one placement both agree on.
func TestConcurrentPlacementAgrees(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		mustPool(t, a, "p1", 100)
		mustPool(t, a, "p2", 100)
		if err := b.Refresh(ctx); err != nil { // b would see them within Options.Refresh anyway
			t.Fatal(err)
		}
		const n = 200
		res := [2][n]string{}
		var wg sync.WaitGroup
		for side, c := range []*catalog.Catalog{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					// Proposals differ: side 0 wants p1, side 1 wants p2.
					p, err := c.Store().Place(ctx, q(i), fmt.Sprintf("p%d", side+1))
					if err != nil {
						t.Error(err)
						return
					}
					res[side][i] = p
				}
			}()
		}
		wg.Wait()
		for i := 0; i < n; i++ {
			if res[0][i] != res[1][i] {
				t.Fatalf("queue %d placed on %q by one client and %q by the other", i, res[0][i], res[1][i])
			}
		}
		// Through the cached API as well, concurrently on fresh queues.
		var mu sync.Mutex
		seen := map[storage.QueueRef]string{}
		for _, c := range []*catalog.Catalog{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := n; i < 2*n; i++ {
					p, err := c.Assign(ctx, q(i), "")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, ok := seen[q(i)]; ok && prev != p {
						t.Errorf("queue %d: %s vs %s", i, prev, p)
					}
					seen[q(i)] = p
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// A restarted client (new process) sees the same placements.
		c := open(t, uri)
		for i := 0; i < 2*n; i++ {
			want := seen[q(i)]
			if i < n {
				want = res[0][i]
			}
			if got, err := c.Locate(ctx, q(i)); err != nil || got != want {
				t.Fatalf("after restart queue %d on %q (%v), want %q", i, got, err, want)
			}
		}
	})
}

// TestFlavors covers flavor membership, placement within a flavor and the
// errors for unknown or empty flavors.
func TestFlavors(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		c := open(t, uri)
		mustPool(t, c, "p1", 100)
		mustPool(t, c, "p2", 100)
		mustPool(t, c, "p3", 100)
		if _, err := c.PutFlavor(ctx, catalog.Flavor{Name: "gold", Pools: []string{"nope"}}); !storage.Is(err, storage.Invalid) {
			t.Fatalf("flavor with unknown pool: %v", err)
		}
		if created, err := c.PutFlavor(ctx, catalog.Flavor{Name: "gold", Pools: []string{"p1", "p2"}}); err != nil || !created {
			t.Fatalf("put flavor: %v %v", created, err)
		}
		if p, _ := c.GetPool(ctx, "p1"); p.Flavor != "gold" {
			t.Errorf("pool p1 flavor = %q, want gold", p.Flavor)
		}
		for i := 0; i < 100; i++ {
			p, err := c.Assign(ctx, q(i), "gold")
			if err != nil || (p != "p1" && p != "p2") {
				t.Fatalf("gold queue on %q: %v", p, err)
			}
		}
		if _, err := c.Assign(ctx, q(500), "tin"); !storage.Is(err, storage.Invalid) || !strings.Contains(err.Error(), "Flavor tin does not exist") {
			t.Errorf("unknown flavor: %v", err)
		}
		if _, err := c.PutFlavor(ctx, catalog.Flavor{Name: "empty"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Assign(ctx, q(501), "empty"); !storage.Is(err, storage.Invalid) || !strings.Contains(err.Error(), "no pool") {
			t.Errorf("flavor without pools: %v", err)
		}
		// Replacing the pool list moves membership; p1 leaves gold.
		if _, err := c.PutFlavor(ctx, catalog.Flavor{Name: "gold", Pools: []string{"p2"}}); err != nil {
			t.Fatal(err)
		}
		f, err := c.GetFlavor(ctx, "gold")
		if err != nil || len(f.Pools) != 1 || f.Pools[0] != "p2" {
			t.Errorf("gold after update: %+v %v", f, err)
		}
		if err := c.DeleteFlavor(ctx, "gold"); err != nil {
			t.Fatal(err)
		}
		if p, _ := c.GetPool(ctx, "p2"); p.Flavor != "" {
			t.Errorf("pool p2 keeps deleted flavor %q", p.Flavor)
		}
	})
}

// TestRegistrationChecksReachability: an unreachable pool is refused unless
// forced; the default probe really dials.
func TestRegistrationChecksReachability(t *testing.T) {
	ctx := context.Background()
	uri := testutil.StartRedis(t, testutil.RedisOptions{}).URL
	st, err := catalog.OpenStore(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	probed := 0
	c, err := catalog.New(ctx, st, catalog.Options{Probe: func(ctx context.Context, u string) error {
		probed++
		return errors.New("connection refused")
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.PutPool(ctx, catalog.Pool{Name: "down", URI: "redis://127.0.0.1:1/0", Weight: 1}, false)
	if !storage.Is(err, storage.Invalid) || !strings.Contains(err.Error(), "cannot connect to redis://127.0.0.1:1/0") {
		t.Errorf("unreachable pool: %v", err)
	}
	if _, err := c.PutPool(ctx, catalog.Pool{Name: "down", URI: "redis://127.0.0.1:1/0", Weight: 1}, true); err != nil {
		t.Errorf("forced registration: %v", err)
	}
	for _, bad := range []catalog.Pool{
		{Name: "x", URI: "http://h/", Weight: 1},
		{Name: "x", URI: "redis://h/", Weight: -1},
		{Name: "bad name", URI: "redis://h/", Weight: 1},
		{Name: "x", URI: "redis://h/", Weight: 1, Flavor: "nosuch"},
	} {
		if _, err := c.PutPool(ctx, bad, true); !storage.Is(err, storage.Invalid) {
			t.Errorf("PutPool(%+v) = %v, want Invalid", bad, err)
		}
	}
	if probed != 1 {
		t.Errorf("probe ran %d times, want 1 (forced registrations skip it)", probed)
	}
}

// TestConcurrentPoolsOnOneURIConflict registers pools of different names
// on one URI at the same moment, through two replicas' catalogs: a check
// that lists the pools before writing lets several in. Exactly one must
// be registered, and every other told Conflict, in each round.
func TestConcurrentPoolsOnOneURIConflict(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		replicas := []*catalog.Catalog{open(t, uri), open(t, uri)}
		const rounds, writers = 8, 6
		for round := range rounds {
			shared := fmt.Sprintf("redis://127.0.0.1:1/%d", round)
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := catalog.Pool{Name: fmt.Sprintf("r%d-w%d", round, w), URI: shared, Weight: 1}
					_, errs[w] = replicas[w%2].PutPool(ctx, p, true)
				}()
			}
			wg.Wait()
			registered := 0
			for w, err := range errs {
				switch {
				case err == nil:
					registered++
				case !storage.Is(err, storage.Conflict) || !strings.Contains(err.Error(), "already uses "+shared):
					t.Errorf("round %d writer %d: %v, want registered or Conflict naming the pool on %s", round, w, err, shared)
				}
			}
			pools, err := replicas[0].Store().ListPools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var on []string
			for _, p := range pools {
				if p.URI == shared {
					on = append(on, p.Name)
				}
			}
			if registered != 1 || len(on) != 1 {
				t.Fatalf("round %d: %d registrations succeeded and pools %v hold %s, want exactly one", round, registered, on, shared)
			}
			// Two registered pools moved to one new URI at once.
			solo := fmt.Sprintf("solo-%d", round)
			mustPool(t, replicas[0], solo, 1)
			moved := shared + "/moved"
			patched := []string{on[0], solo}
			for w, name := range patched {
				wg.Go(func() { _, errs[w] = replicas[w].PatchPool(ctx, name, catalog.PoolPatch{URI: &moved}, true) })
			}
			wg.Wait()
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Fatalf("round %d: two pools moved to one URI at once: %v, %v; want one moved and one Conflict", round, errs[0], errs[1])
			}
			for w, err := range errs[:2] {
				if err != nil && (!storage.Is(err, storage.Conflict) || !strings.Contains(err.Error(), "already uses "+moved)) {
					t.Errorf("round %d: patch of %s: %v, want Conflict", round, patched[w], err)
				}
			}
		}
	})
}

// TestDeletePoolRacingPlacementsLeavesNoOrphan deletes a pool while
// another catalog client places queues on it. Either may win each race,
// but a queue must never be left placed on a pool that is gone: its
// messages would be out of every replica's reach.
func TestDeletePoolRacingPlacementsLeavesNoOrphan(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		const rounds, placers = 12, 4
		for round := range rounds {
			pool := fmt.Sprintf("gone-%d", round)
			mustPool(t, a, pool, 0)
			var wg sync.WaitGroup
			for w := range placers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 5 {
						_, err := b.Store().Place(ctx, q(round*1000+w*10+i), pool)
						if err != nil && !storage.Is(err, storage.Invalid) {
							t.Errorf("place: %v", err)
						}
					}
				}()
			}
			deleted := false
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := a.DeletePool(ctx, pool)
				if err != nil && !storage.Is(err, storage.Conflict) {
					t.Errorf("delete: %v", err)
				}
				deleted = err == nil
			}()
			wg.Wait()
			n, err := a.Store().QueueCount(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			_, gerr := a.Store().GetPool(ctx, pool)
			exists := gerr == nil
			if deleted == exists || (!exists && n > 0) {
				t.Fatalf("round %d: delete succeeded %v, pool exists %v (%v), %d queues placed on it", round, deleted, exists, gerr, n)
			}
		}
	})
}

// TestNoPoolStaysInADeletedFlavor registers pools in a flavor while
// another client deletes the flavor. Either may come first, but no pool
// may be left in a flavor that is gone: re-created later, the flavor
// would take it in unasked.
func TestNoPoolStaysInADeletedFlavor(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		const rounds, joiners = 12, 3
		for round := range rounds {
			flavor := fmt.Sprintf("f%d", round)
			if _, err := a.PutFlavor(ctx, catalog.Flavor{Name: flavor}); err != nil {
				t.Fatal(err)
			}
			if err := b.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range joiners {
				wg.Go(func() {
					p := catalog.Pool{Name: fmt.Sprintf("j%d-%d", round, w), URI: fmt.Sprintf("redis://127.0.0.1:1/%d", round*10+w), Weight: 1, Flavor: flavor}
					if _, err := b.PutPool(ctx, p, true); err != nil && !storage.Is(err, storage.Invalid) {
						t.Errorf("join: %v", err)
					}
				})
			}
			wg.Go(func() {
				if err := a.DeleteFlavor(ctx, flavor); err != nil {
					t.Errorf("delete flavor: %v", err)
				}
			})
			wg.Wait()
			pools, err := a.Store().ListPools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pools {
				if p.Flavor == flavor {
					t.Fatalf("round %d: pool %s is in flavor %s, which was deleted", round, p.Name, flavor)
				}
			}
		}
	})
}

// TestPatchRacingDeleteDoesNotRevivePool patches a pool while another
// client deletes it. Either may come first, but when both succeed the
// pool must be gone: a patch that read the pool before the delete must not
// write it back (it would be a 404 after the delete).
func TestPatchRacingDeleteDoesNotRevivePool(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		for round := range 20 {
			name := fmt.Sprintf("doomed-%d", round)
			mustPool(t, a, name, 10)
			weight := 20
			perr := patchRacingDelete(t, round,
				func() error { _, err := b.PatchPool(ctx, name, catalog.PoolPatch{Weight: &weight}, true); return err },
				func() error { return a.DeletePool(ctx, name) })
			if p, err := a.Store().GetPool(ctx, name); !storage.Is(err, storage.NotFound) {
				t.Fatalf("round %d: pool %+v (%v) is there after its delete succeeded (patch: %v)", round, p, err, perr)
			}
		}
	})
}

// TestFlavorPatchRacingDeleteDoesNotReviveFlavor: the same for flavors,
// whose patch (a new pool list) used to be a put of the flavor it read.
func TestFlavorPatchRacingDeleteDoesNotReviveFlavor(t *testing.T) {
	stores(t, func(t *testing.T, uri string) {
		ctx := context.Background()
		a, b := open(t, uri), open(t, uri)
		mustPool(t, a, "member", 10)
		for round := range 20 {
			name := fmt.Sprintf("fleeting-%d", round)
			if _, err := a.PutFlavor(ctx, catalog.Flavor{Name: name}); err != nil {
				t.Fatal(err)
			}
			perr := patchRacingDelete(t, round,
				func() error { return b.ReplaceFlavor(ctx, catalog.Flavor{Name: name, Pools: []string{"member"}}) },
				func() error { return a.DeleteFlavor(ctx, name) })
			if f, err := a.Store().GetFlavor(ctx, name); !storage.Is(err, storage.NotFound) {
				t.Fatalf("round %d: flavor %+v (%v) is there after its delete succeeded (patch: %v)", round, f, err, perr)
			}
			if p, err := a.Store().GetPool(ctx, "member"); err != nil || p.Flavor != "" {
				t.Fatalf("round %d: pool member is in flavor %q (%v) after the flavor's delete", round, p.Flavor, err)
			}
		}
	})
}

// patchRacingDelete runs patch and remove at the same moment. The delete
// must succeed; the patch may come first, or find nothing (NotFound),
// which it returns.
func patchRacingDelete(t *testing.T, round int, patch, remove func() error) error {
	t.Helper()
	var perr, derr error
	var wg sync.WaitGroup
	wg.Go(func() { perr = patch() })
	wg.Go(func() { derr = remove() })
	wg.Wait()
	if derr != nil {
		t.Fatalf("round %d: delete: %v", round, derr)
	}
	if perr != nil && !storage.Is(perr, storage.NotFound) {
		t.Fatalf("round %d: patch: %v", round, perr)
	}
	return perr
}
