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
// During a move the target holds the queue's metadata, once prepared.
func (s queueStore) Create(ctx context.Context, q storage.QueueRef, meta storage.Metadata) (created bool, err error) {
	err = s.d.do(ctx, q, true, flavorOf(meta), func(r routed) (err error) {
		drv, err := metaWriter(r, meta)
		if err != nil {
			return err
		}
		if err := s.d.colocateDeadLetter(ctx, q, r.pool, meta); err != nil {
			return err
		}
		created, err = drv.Queues().Create(ctx, q, meta)
		return err
	})
	return created, err
}

// deadLetterOf reads the `_dead_letter_queue` metadata key.
func deadLetterOf(meta storage.Metadata) string {
	s, _ := meta["_dead_letter_queue"].(string)
	return s
}

// metaWriter is where a metadata write goes: the queue's pool, or during a
// move the prepared target. A move refuses a dead-letter queue (it would
// leave its pool).
func metaWriter(r routed, meta storage.Metadata) (storage.Driver, error) {
	switch {
	case !r.moving:
		return r.drv, nil
	case r.sealing():
		return nil, errSealing
	case deadLetterOf(meta) != "":
		return nil, refuseWhileMoving("pooling.queues.metadata", r, "set a dead-letter queue")
	}
	return r.dst, nil
}

// Exists asks the queue's pool; during a move, either side.
func (s queueStore) Exists(ctx context.Context, q storage.QueueRef) (ok bool, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		ok, err = r.drv.Queues().Exists(ctx, q)
		if r.moving && (movedErr(err) || err == nil && !ok) {
			ok, err = r.dst.Queues().Exists(ctx, q)
		}
		return err
	})
	return ok, err
}

// GetMetadata asks the queue's pool; during a move, the target once it is
// prepared (it holds the metadata from then on).
func (s queueStore) GetMetadata(ctx context.Context, q storage.QueueRef) (meta storage.Metadata, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		drv := r.drv
		if r.moving && !r.sealing() {
			drv = r.dst
		}
		meta, err = drv.Queues().GetMetadata(ctx, q)
		return err
	})
	return meta, err
}

// SetMetadata places the queue if needed. A `_flavor` set on a queue that is
// already placed does not move it: placement never changes implicitly.
func (s queueStore) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	return s.d.do(ctx, q, true, flavorOf(meta), func(r routed) error {
		drv, err := metaWriter(r, meta)
		if err != nil {
			return err
		}
		if err := s.d.colocateDeadLetter(ctx, q, r.pool, meta); err != nil {
			return err
		}
		return drv.Queues().SetMetadata(ctx, q, meta)
	})
}

// UpdateMetadata updates the queue on its pool. A dead-letter queue the
// update names is placed with the queue before the new metadata is stored,
// as SetMetadata does.
func (s queueStore) UpdateMetadata(ctx context.Context, q storage.QueueRef, update storage.MetadataUpdate) (out storage.Metadata, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		drv, err := metaWriter(r, nil)
		if err != nil {
			return err
		}
		out, err = drv.Queues().UpdateMetadata(ctx, q, func(cur storage.Metadata) (storage.Metadata, error) {
			next, err := update(cur)
			if err != nil {
				return nil, err
			}
			if deadLetterOf(next) == deadLetterOf(cur) {
				// The dead-letter queue stays: nothing to place, and a
				// queue apart from it for a move can still be updated.
				return next, nil
			}
			if _, err := metaWriter(r, next); err != nil {
				return nil, err
			}
			return next, s.d.colocateDeadLetter(ctx, q, r.pool, next)
		})
		return err
	})
	return out, err
}

// Delete deletes the queue on its pool, then forgets its placement. A
// moving queue is deleted once the move is done.
func (s queueStore) Delete(ctx context.Context, q storage.QueueRef) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		if r.moving {
			return refuseWhileMoving("pooling.queues.delete", r, "delete it")
		}
		if err := r.drv.Queues().Delete(ctx, q); err != nil {
			return err
		}
		if r.pool == "" {
			return nil
		}
		return s.d.cat.Forget(ctx, q, r.pool)
	})
}

// Stats asks the queue's pool; during a move it adds both sides.
func (s queueStore) Stats(ctx context.Context, q storage.QueueRef) (st storage.QueueStats, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		st, err = r.drv.Queues().Stats(ctx, q)
		if !r.moving {
			return err
		}
		if movedErr(err) || storage.Is(err, storage.NotFound) {
			st, err = storage.QueueStats{}, nil
		}
		if err != nil {
			return err
		}
		more, err := r.dst.Queues().Stats(ctx, q)
		if storage.Is(err, storage.NotFound) {
			return nil
		}
		st = sumStats(st, more)
		return err
	})
	return st, err
}

// Purge asks the queue's pool; during a move, both sides.
func (s queueStore) Purge(ctx context.Context, q storage.QueueRef) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		if !r.moving {
			return r.drv.Queues().Purge(ctx, q)
		}
		purge := func(drv storage.Driver) error { return drv.Queues().Purge(ctx, q) }
		return bothWays(r, purge, purge)
	})
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
	dlq := deadLetterOf(meta)
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
