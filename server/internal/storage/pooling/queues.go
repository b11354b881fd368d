package pooling

import (
	"context"
	"fmt"
	"sort"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

type queueStore struct{ d *Driver }

// flavorOf reads the `_flavor` metadata key that picks a queue's flavor.
func flavorOf(meta storage.Metadata) string {
	s, _ := meta["_flavor"].(string)
	return s
}

// Create places the queue (on its flavor's pools) and creates it there.
func (s queueStore) Create(ctx context.Context, q storage.QueueRef, meta storage.Metadata) (bool, error) {
	drv, pool, err := s.d.route(ctx, q, true, flavorOf(meta))
	if err != nil {
		return false, err
	}
	if err := s.d.colocateDeadLetter(ctx, q, pool, meta); err != nil {
		return false, err
	}
	return drv.Queues().Create(ctx, q, meta)
}

// Exists asks the queue's pool.
func (s queueStore) Exists(ctx context.Context, q storage.QueueRef) (bool, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return false, err
	}
	return drv.Queues().Exists(ctx, q)
}

// GetMetadata asks the queue's pool.
func (s queueStore) GetMetadata(ctx context.Context, q storage.QueueRef) (storage.Metadata, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return nil, err
	}
	return drv.Queues().GetMetadata(ctx, q)
}

// SetMetadata places the queue if needed. A `_flavor` set on a queue that is
// already placed does not move it: placement never changes implicitly.
func (s queueStore) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	drv, pool, err := s.d.route(ctx, q, true, flavorOf(meta))
	if err != nil {
		return err
	}
	if err := s.d.colocateDeadLetter(ctx, q, pool, meta); err != nil {
		return err
	}
	return drv.Queues().SetMetadata(ctx, q, meta)
}

// UpdateMetadata updates the queue on its pool. A dead-letter queue the
// update names is placed with the queue before the new metadata is stored,
// as SetMetadata does.
func (s queueStore) UpdateMetadata(ctx context.Context, q storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	drv, pool, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return nil, err
	}
	return drv.Queues().UpdateMetadata(ctx, q, func(cur storage.Metadata) (storage.Metadata, error) {
		next, err := update(cur)
		if err != nil {
			return nil, err
		}
		return next, s.d.colocateDeadLetter(ctx, q, pool, next)
	})
}

// Delete deletes the queue on its pool, then forgets its placement.
func (s queueStore) Delete(ctx context.Context, q storage.QueueRef) error {
	drv, pool, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	if err := drv.Queues().Delete(ctx, q); err != nil {
		return err
	}
	if pool == "" {
		return nil
	}
	return s.d.cat.Forget(ctx, q, pool)
}

// Stats asks the queue's pool.
func (s queueStore) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return storage.QueueStats{}, err
	}
	return drv.Queues().Stats(ctx, q)
}

// Purge asks the queue's pool.
func (s queueStore) Purge(ctx context.Context, q storage.QueueRef) error {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	return drv.Queues().Purge(ctx, q)
}

// List merges the pages of every pool and the default store: each source
// returns its first Limit names after the marker, and the first Limit of
// their sorted union is exactly the page a single store would return. A
// pool that cannot be reached is left out (and logged) rather than failing
// the listing for every other pool.
func (s queueStore) List(ctx context.Context, project string, o storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	sources := map[string]storage.Driver{catalog.DefaultPool: s.d.fallback}
	var firstErr error
	for _, p := range s.d.cat.CachedPools() {
		drv, err := s.d.pool(ctx, p.Name)
		if err != nil {
			s.d.log.Warn("queue listing skips an unreachable pool", "pool", p.Name, "err", err)
			firstErr = err
			continue
		}
		sources[p.Name] = drv
	}
	seen := map[string]bool{}
	var all []storage.QueueInfo
	answered := 0
	for name, drv := range sources {
		page, err := drv.Queues().List(ctx, project, o)
		if err != nil && !storage.Is(err, storage.Unavailable) {
			return nil, err
		}
		if err != nil {
			s.d.log.Warn("queue listing skips an unreachable pool", "pool", name, "err", err)
			firstErr = err
			continue
		}
		answered++
		for _, qi := range page {
			if !seen[qi.Name] {
				seen[qi.Name] = true
				all = append(all, qi)
			}
		}
	}
	if answered == 0 && firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	if len(all) > o.Limit {
		all = all[:o.Limit]
	}
	return all, nil
}

// colocateDeadLetter places a queue's dead-letter queue on the queue's own
// pool: messages move between the two inside one backend, so they must
// share it.
func (d *Driver) colocateDeadLetter(ctx context.Context, q storage.QueueRef, pool string, meta storage.Metadata) error {
	dlq, _ := meta["_dead_letter_queue"].(string)
	if dlq == "" || pool == "" {
		return nil
	}
	return d.placeWith(ctx, storage.QueueRef{Project: q.Project, Name: dlq}, q, pool)
}

// placeWith places other on pool, failing if it already lives elsewhere.
func (d *Driver) placeWith(ctx context.Context, other, q storage.QueueRef, pool string) error {
	got, err := d.cat.Store().Place(ctx, other, pool)
	if err != nil {
		return err
	}
	if got != pool {
		return storage.E("pooling.deadletter", storage.Invalid, fmt.Errorf("%w: %s is on pool %s, %s on pool %s",
			storage.ErrDeadLetterPool, other.Name, got, q.Name, pool))
	}
	return nil
}
