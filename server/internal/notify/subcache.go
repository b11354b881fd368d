package notify

import (
	"context"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// subCache keeps subscriptions looked up for deliveries for a moment, so a
// burst to one subscriber costs one store read, not one per message. A
// change (PATCH, delete) is seen after at most subCacheTTL.
type subCache struct {
	store storage.SubscriptionStore
	mu    sync.Mutex
	m     map[subKey]cached
}

const (
	subCacheTTL = time.Second
	subCacheMax = 10000
)

type subKey struct {
	q  storage.QueueRef
	id string
}

type cached struct {
	sub storage.Subscription
	ok  bool
	at  time.Time
}

func newSubCache(store storage.SubscriptionStore) *subCache {
	return &subCache{store: store, m: map[subKey]cached{}}
}

// get returns the live subscription, ok false when it no longer exists.
func (c *subCache) get(ctx context.Context, q storage.QueueRef, id string) (storage.Subscription, bool, error) {
	k := subKey{q, id}
	c.mu.Lock()
	e, hit := c.m[k]
	c.mu.Unlock()
	if hit && time.Since(e.at) < subCacheTTL {
		return e.sub, e.ok, nil
	}
	sub, err := c.store.Get(ctx, q, id)
	if err != nil && !storage.Is(err, storage.NotFound) {
		return storage.Subscription{}, false, err
	}
	e = cached{sub: sub, ok: err == nil, at: time.Now()}
	c.mu.Lock()
	if len(c.m) >= subCacheMax {
		clear(c.m) // bounded memory; entries are cheap to fetch again
	}
	c.m[k] = e
	c.mu.Unlock()
	return e.sub, e.ok, nil
}
