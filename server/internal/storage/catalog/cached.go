package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// Options tune a Catalog.
type Options struct {
	// Refresh is how often the version token is polled (default 1 s): the
	// longest a replica routes with a pool list another replica changed.
	Refresh time.Duration
	// PlacementTTL bounds how long a cached placement is trusted (default
	// 30 s); placements change only when a queue is deleted.
	PlacementTTL time.Duration
	// Probe checks that a pool URI answers before it is registered; nil
	// opens it with storage.Open and pings it.
	Probe  func(ctx context.Context, uri string) error
	Logger *slog.Logger
}

// Catalog is a Store with validation, weighted placement and an in-memory
// cache that every lookup on the request path is served from.
type Catalog struct {
	store Store
	opts  Options

	mu      sync.RWMutex
	version string
	pools   []Pool // sorted by name
	flavors map[string]Flavor
	placed  map[storage.QueueRef]placement
	moving  map[storage.QueueRef]Migration // active moves
	changed []func()
	// emptyChecked is when HasPools last checked an empty cache (Unix ns).
	emptyChecked atomic.Int64
	// crowded holds the pools above their high-water mark (SetCrowded).
	crowded atomic.Pointer[map[string]bool]

	stop chan struct{}
	done chan struct{}
}

type placement struct {
	pool string
	at   time.Time
}

// New loads the catalog from store and keeps it fresh until Close.
func New(ctx context.Context, store Store, opts Options) (*Catalog, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.PlacementTTL <= 0 {
		opts.PlacementTTL = 30 * time.Second
	}
	if opts.Probe == nil {
		opts.Probe = probe
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Catalog{store: store, opts: opts, placed: map[storage.QueueRef]placement{}, moving: map[storage.QueueRef]Migration{}, stop: make(chan struct{}), done: make(chan struct{})}
	if err := c.reload(ctx); err != nil {
		return nil, err
	}
	go c.poll()
	return c, nil
}

// probe opens the URI with its driver and pings it.
func probe(ctx context.Context, uri string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := storage.Open(ctx, uri, storage.Options{})
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Ping(ctx)
}

// OnChange registers fn to run after the pools or flavors changed (the
// pooled driver reopens pools whose URI changed).
func (c *Catalog) OnChange(fn func()) {
	c.mu.Lock()
	c.changed = append(c.changed, fn)
	c.mu.Unlock()
}

func (c *Catalog) poll() {
	defer close(c.done)
	t := time.NewTicker(c.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(c.opts.Refresh*5, 5*time.Second))
			v, err := c.store.Version(ctx)
			c.mu.RLock()
			same := v == c.version
			c.mu.RUnlock()
			if err == nil && !same {
				err = c.reload(ctx)
			}
			cancel()
			if err != nil {
				c.opts.Logger.Warn("catalog refresh failed; routing with the cached catalog", "err", err)
			}
		}
	}
}

// reload reads the version first, then the data: a change that lands in
// between bumps the version again and is picked up by the next poll. A
// move's change of state bumps the version too, so placements and moves are
// never older than one poll.
func (c *Catalog) reload(ctx context.Context) error {
	v, err := c.store.Version(ctx)
	if err != nil {
		return err
	}
	pools, err := c.store.ListPools(ctx)
	if err != nil {
		return err
	}
	flavors, err := c.store.ListFlavors(ctx)
	if err != nil {
		return err
	}
	active, err := c.store.ActiveMigrations(ctx)
	if err != nil {
		return err
	}
	moving := make(map[storage.QueueRef]Migration, len(active))
	for _, m := range active {
		moving[m.Queue] = m
	}
	fm := make(map[string]Flavor, len(flavors))
	for _, f := range flavors {
		fm[f.Name] = f
	}
	c.mu.Lock()
	c.version, c.pools, c.flavors = v, pools, fm
	c.placed, c.moving = map[storage.QueueRef]placement{}, moving
	fns := append([]func(){}, c.changed...)
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return nil
}

// Close stops the refresher and closes the store.
func (c *Catalog) Close() error {
	close(c.stop)
	<-c.done
	return c.store.Close()
}

// Store returns the underlying management store.
func (c *Catalog) Store() Store { return c.store }

// CachedPools returns the cached pool list (sorted by name).
func (c *Catalog) CachedPools() []Pool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pools
}

// PoolURI returns the URI of the pool called name. A pool missing from the
// cache may have been registered since the last poll: a queue placed in it
// through another replica names it before this one has seen it. So a miss
// checks the catalog's version once (catchUp) before it stands.
func (c *Catalog) PoolURI(ctx context.Context, name string) (string, bool) {
	find := func() (string, bool) {
		for _, p := range c.CachedPools() {
			if p.Name == name {
				return p.URI, true
			}
		}
		return "", false
	}
	if uri, ok := find(); ok {
		return uri, true
	}
	if !c.catchUp(ctx) {
		return "", false
	}
	return find()
}

// HasPools reports whether any pool is registered. An empty cache is not
// trusted for long: the first pool may have been registered (through
// another replica, or by the operator) since the last poll, and until this
// replica knows of it, it would put new queues on its default store and
// answer for queues placed in the pool as if they were absent. So while no
// pool is cached, the catalog's version is checked again at most every
// EmptyRecheck: one read per EmptyRecheck for a deployment without pools,
// instead of a catalog lookup per call.
func (c *Catalog) HasPools(ctx context.Context) bool {
	if len(c.CachedPools()) > 0 {
		return true
	}
	now := time.Now().UnixNano()
	last := c.emptyChecked.Load()
	if now-last >= int64(EmptyRecheck) && c.emptyChecked.CompareAndSwap(last, now) {
		c.catchUp(ctx)
	}
	return len(c.CachedPools()) > 0
}

// EmptyRecheck is the least time between two checks of the catalog while
// no pool is cached (HasPools).
const EmptyRecheck = 100 * time.Millisecond

// staleCheckTimeout bounds the check of a cached placement past its TTL;
// a catalog that answers takes milliseconds.
const staleCheckTimeout = 500 * time.Millisecond

// Locate returns q's pool, or "" when q is not placed.
func (c *Catalog) Locate(ctx context.Context, q storage.QueueRef) (string, error) {
	c.mu.RLock()
	p, ok := c.placed[q]
	c.mu.RUnlock()
	if ok && time.Since(p.at) < c.opts.PlacementTTL {
		return p.pool, nil
	}
	lctx := ctx
	if ok {
		// Checking a placement past its TTL must not take the request's
		// deadline with it when the catalog hangs (a killed pod's address):
		// the call after it would fail for a queue that is fine.
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, staleCheckTimeout)
		defer cancel()
	}
	pool, err := c.store.Lookup(lctx, q)
	if err != nil && ok {
		// The catalog is unreachable: a stale placement is still right,
		// since placements only change when their queue is deleted. It is
		// trusted for another TTL, so requests do not each wait to learn
		// that the catalog is still down.
		c.remember(q, p.pool)
		return p.pool, nil
	}
	if err != nil || pool == "" {
		return "", err
	}
	c.remember(q, pool)
	return pool, nil
}

func (c *Catalog) remember(q storage.QueueRef, pool string) {
	c.mu.Lock()
	c.placed[q] = placement{pool: pool, at: time.Now()}
	c.mu.Unlock()
}

// Assign places q unless it is placed already and returns its pool. The
// candidates are the flavor's pools (all pools when flavor is ""); an
// unknown flavor or one without a pool of positive weight is Invalid.
func (c *Catalog) Assign(ctx context.Context, q storage.QueueRef, flavor string) (string, error) {
	if pool, err := c.Locate(ctx, q); err != nil || pool != "" {
		return pool, err
	}
	pool, err := c.assign(ctx, q, flavor)
	if storage.Is(err, storage.Invalid) && c.catchUp(ctx) {
		// The refusal came from a cache older than the catalog (a pool or
		// flavor registered through another replica since the last poll):
		// decide again on the catalog as it is.
		pool, err = c.assign(ctx, q, flavor)
	}
	return pool, err
}

// catchUp reloads the cache when the catalog's version moved since it was
// loaded, and reports whether it did. It costs one version read, and runs
// only on the refusal path.
func (c *Catalog) catchUp(ctx context.Context) bool {
	v, err := c.store.Version(ctx)
	if err != nil {
		return false
	}
	c.mu.RLock()
	same := v == c.version
	c.mu.RUnlock()
	return !same && c.reload(ctx) == nil
}

// assign chooses and records q's pool from the cached pools and flavors.
func (c *Catalog) assign(ctx context.Context, q storage.QueueRef, flavor string) (string, error) {
	const op = "catalog.assign"
	c.mu.RLock()
	candidates := c.pools
	f, known := c.flavors[flavor]
	c.mu.RUnlock()
	if flavor != "" {
		if !known {
			return "", noFlavor(op, flavor)
		}
		candidates = c.members(f)
	}
	pool, ok := choose(placementKey(q), c.roomy(candidates))
	if !ok {
		if flavor != "" {
			return "", storage.E(op, storage.Invalid, storage.Public(fmt.Sprintf("Flavor %s has no pool that accepts new queues (no pools, or all of weight 0)", flavor)))
		}
		if len(candidates) == 0 {
			return "", storage.E(op, storage.Invalid, storage.Public("no pool is registered"))
		}
		return "", storage.E(op, storage.Invalid, storage.Public("no pool accepts new queues: every registered pool has weight 0"))
	}
	got, err := c.store.Place(ctx, q, pool)
	if err != nil {
		return "", err
	}
	c.remember(q, got)
	return got, nil
}

// PlaceOn records that q lives in pool (DefaultPool: the default store),
// where it was found, unless it is placed already; it returns the pool q
// is recorded in.
func (c *Catalog) PlaceOn(ctx context.Context, q storage.QueueRef, pool string) (string, error) {
	got, err := c.store.Place(ctx, q, pool)
	if err == nil {
		c.remember(q, got)
	}
	return got, err
}

// Proposal is the pool that Assign would choose for q without a flavor,
// or "" when no pool accepts new queues. It records nothing.
func (c *Catalog) Proposal(q storage.QueueRef) string {
	c.mu.RLock()
	candidates := c.pools
	c.mu.RUnlock()
	pool, _ := choose(placementKey(q), c.roomy(candidates))
	return pool
}

// SetCrowded names the pools above their high-water mark
// (storage.Capacity.Crowded): new queues go elsewhere while another
// candidate has room. The pooled driver sets it as it watches the pools.
func (c *Catalog) SetCrowded(pools map[string]bool) { c.crowded.Store(&pools) }

// roomy is candidates without the crowded pools, or candidates as they
// are when every one that takes new queues is crowded: a queue placed on
// a crowded pool still gets its posts refused only once the pool is full,
// where refusing to create it would fail it at once.
func (c *Catalog) roomy(candidates []Pool) []Pool {
	crowded := c.crowded.Load()
	if crowded == nil || len(*crowded) == 0 {
		return candidates
	}
	var out []Pool
	for _, p := range candidates {
		if !(*crowded)[p.Name] && p.Weight > 0 {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return candidates
	}
	return out
}

// Forget drops q's placement after the queue was deleted from pool.
func (c *Catalog) Forget(ctx context.Context, q storage.QueueRef, pool string) error {
	c.mu.Lock()
	delete(c.placed, q)
	c.mu.Unlock()
	return c.store.Unplace(ctx, q, pool)
}

func (c *Catalog) members(f Flavor) []Pool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Pool
	for _, p := range c.pools {
		if contains(f.Pools, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// Refresh reloads the cache now (after an admin change through this
// replica, so it sees its own writes at once).
func (c *Catalog) Refresh(ctx context.Context) error { return c.reload(ctx) }
