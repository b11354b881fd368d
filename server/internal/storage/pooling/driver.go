// Package pooling is a storage.Driver that spreads queues over pools: each
// call goes to the pool its queue is placed on, per the catalog. A pool that
// cannot be reached fails only the calls for its own queues (Unavailable);
// every other pool keeps serving.
//
// With no pool registered every call goes to the default store, exactly as
// without pooling. Once pools exist, a queue that already lives on the
// default store is recorded there (catalog.DefaultPool) the first time it is
// touched, so its messages are never left behind.
package pooling

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// retryOpen is how long a pool that failed to open answers Unavailable
// before the next attempt, so a dead pool is not redialled per request.
const retryOpen = time.Second

// closeDelay lets requests still using a replaced pool driver finish.
const closeDelay = 10 * time.Second

// Driver routes every call through the catalog.
type Driver struct {
	cat      *catalog.Catalog
	fallback storage.Driver
	opts     storage.Options
	log      *slog.Logger

	mu    sync.RWMutex
	conns map[string]*conn
	mover *Mover // nil until StartMover
	wrap  PoolWrapper

	capMu     sync.Mutex
	readings  map[string]storage.Capacity
	stopWatch chan struct{}
	watchDone chan struct{}
	closeOnce sync.Once
}

// A PoolWrapper wraps the driver of pool name when it is opened (the
// server times every pool's calls under the pool's name). It must keep
// the optional interfaces the driver has (Migrator, Remover, ...).
type PoolWrapper func(name string, d storage.Driver) (storage.Driver, error)

// conn is one pool's driver. Opening happens under the conn's own lock, so
// a pool that is slow to answer never holds up routing to the others.
type conn struct {
	uri  string
	open atomic.Pointer[storage.Driver]
	mu   sync.Mutex
	err  error
	at   time.Time
}

// New returns a pooled driver over cat, with fallback as the default store.
// The driver owns neither: Close closes only the pools it opened. wrap, if
// not nil, wraps each pool's driver as it is opened.
func New(cat *catalog.Catalog, fallback storage.Driver, opts storage.Options, log *slog.Logger, wrap PoolWrapper) *Driver {
	if log == nil {
		log = slog.Default()
	}
	d := &Driver{cat: cat, fallback: fallback, opts: opts.WithDefaults(), log: log, conns: map[string]*conn{}, wrap: wrap,
		stopWatch: make(chan struct{}), watchDone: make(chan struct{})}
	cat.OnChange(d.prune)
	go d.watchCapacity()
	return d
}

// Queues returns the routed queue store.
func (d *Driver) Queues() storage.QueueStore { return queueStore{d} }

// Messages returns the routed message store.
func (d *Driver) Messages() storage.MessageStore { return messageStore{d} }

// Claims returns the routed claim store.
func (d *Driver) Claims() storage.ClaimStore { return claimStore{d} }

// Subscriptions returns the routed subscription store.
func (d *Driver) Subscriptions() storage.SubscriptionStore { return subscriptionStore{d} }

// Deliveries returns the delivery store over every pool.
func (d *Driver) Deliveries() storage.DeliveryStore { return deliveryStore{d} }

// Ping checks the catalog: without it no queue can be routed. Pools are
// reported one by one by PoolHealth.
func (d *Driver) Ping(ctx context.Context) error {
	if err := d.cat.Store().Ping(ctx); err != nil {
		return storage.E("pooling.ping", storage.Unavailable, fmt.Errorf("catalog: %w", err))
	}
	return nil
}

// PoolHealth pings every registered pool (and the default store, as
// catalog.DefaultPool); a nil error means reachable.
func (d *Driver) PoolHealth(ctx context.Context) map[string]error {
	out := map[string]error{catalog.DefaultPool: d.fallback.Ping(ctx)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range d.cat.CachedPools() {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			drv, err := d.pool(ctx, name)
			if err == nil {
				err = drv.Ping(ctx)
			}
			mu.Lock()
			out[name] = err
			mu.Unlock()
		}(p.Name)
	}
	wg.Wait()
	return out
}

// Close stops the mover and closes the pool drivers this driver opened.
func (d *Driver) Close() error {
	d.mu.RLock()
	mv := d.mover
	d.mu.RUnlock()
	if mv != nil {
		mv.Stop()
	}
	d.closeOnce.Do(func() { close(d.stopWatch) })
	<-d.watchDone
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, c := range d.conns {
		if drv := c.open.Load(); drv != nil {
			_ = (*drv).Close()
		}
		delete(d.conns, name)
	}
	return nil
}

// pool returns the driver of a registered pool, opening it on first use.
func (d *Driver) pool(ctx context.Context, name string) (storage.Driver, error) {
	const op = "pooling.route"
	if name == catalog.DefaultPool {
		return d.fallback, nil
	}
	uri, ok := d.cat.PoolURI(ctx, name)
	if !ok {
		return nil, storage.E(op, storage.Unavailable, fmt.Sprintf("pool %s is not registered", name))
	}
	d.mu.RLock()
	c := d.conns[name]
	d.mu.RUnlock()
	if c != nil && c.uri == uri {
		if drv := c.open.Load(); drv != nil {
			return *drv, nil
		}
	} else {
		d.mu.Lock()
		if c = d.conns[name]; c == nil || c.uri != uri {
			c = &conn{uri: uri}
			d.conns[name] = c
		}
		d.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if drv := c.open.Load(); drv != nil {
		return *drv, nil
	}
	if c.err != nil && time.Since(c.at) < retryOpen {
		return nil, c.err
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	drv, err := storage.Open(octx, uri, d.opts)
	if err == nil && d.wrap != nil {
		raw := drv
		if drv, err = d.wrap(name, raw); err != nil {
			raw.Close()
		}
	}
	c.at = time.Now()
	if err != nil {
		c.err = storage.E(op, storage.Unavailable, fmt.Errorf("pool %s unavailable: %w", name, err))
		return nil, c.err
	}
	c.err = nil
	c.open.Store(&drv)
	return drv, nil
}

// prune closes drivers of pools that were removed or got a new URI.
func (d *Driver) prune() {
	uris := map[string]string{}
	for _, p := range d.cat.CachedPools() {
		uris[p.Name] = p.URI
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, c := range d.conns {
		if uris[name] == c.uri {
			continue
		}
		delete(d.conns, name)
		if drv := c.open.Load(); drv != nil {
			old := *drv
			time.AfterFunc(closeDelay, func() { _ = old.Close() })
		}
	}
}

// route finds the driver for q. With create set, a queue that is placed
// nowhere is placed now (on the flavor's pools when flavor is set).
// Without it, such a queue is absent, and the default store, which does not
// hold it either, gives the answers for an absent queue.
func (d *Driver) route(ctx context.Context, q storage.QueueRef, create bool, flavor string) (storage.Driver, string, error) {
	if !d.cat.HasPools(ctx) {
		// No pools: everything lives on the default store, and no call
		// pays a catalog round trip.
		return d.fallback, "", nil
	}
	pool, err := d.cat.Locate(ctx, q)
	if err != nil {
		return nil, "", storage.E("pooling.route", storage.Unavailable, fmt.Errorf("catalog: %w", err))
	}
	if pool == "" {
		exists, err := d.fallback.Queues().Exists(ctx, q)
		if err != nil {
			return nil, "", err
		}
		switch {
		case exists:
			pool, err = d.cat.PlaceOn(ctx, q, catalog.DefaultPool)
		case !create:
			if pool = d.orphan(ctx, q); pool == "" {
				return d.fallback, "", nil
			}
			pool, err = d.cat.PlaceOn(ctx, q, pool)
		default:
			pool, err = d.cat.Assign(ctx, q, flavor)
		}
		if err != nil {
			return nil, "", err
		}
	}
	drv, err := d.pool(ctx, pool)
	return drv, pool, err
}

// orphan is the pool where q has messages or subscriptions without a
// placement, if it is the one q would be placed in now; "" otherwise. A
// post or a subscribe through a placement cached before the queue's delete
// can re-create them in its pool after the delete dropped the placement.
// The next post places the queue there again (placement is deterministic),
// so until then a call that creates nothing must find them there too:
// answered from the default store, a delete with a claim, or of a
// subscription, said 204 while the message or subscription stayed, and it
// came back with the next post (Concurrency/WipesRacePosts,
// Subscriptions/RaceQueueDeletes). A pool that cannot be asked is passed
// over: the queue is answered as absent, as before.
func (d *Driver) orphan(ctx context.Context, q storage.QueueRef) string {
	pool := d.cat.Proposal(q)
	if pool == "" {
		return ""
	}
	drv, err := d.pool(ctx, pool)
	if err != nil {
		return ""
	}
	found, err := drv.Queues().Exists(ctx, q)
	if err == nil && !found {
		// A subscription does not create its queue.
		var subs []storage.Subscription
		subs, _, err = drv.Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Limit: 1})
		found = len(subs) > 0
	}
	if err != nil || !found {
		return ""
	}
	return pool
}
