package pooling

import (
	"context"
	"errors"
	"slices"
	"time"

	"sluice.dev/server/internal/storage"
)

// Subscriptions live on the pool of their queue, next to its messages, so
// that a post records its deliveries in the same atomic step there. During a
// move they are on the target once it is prepared (the mover copies them
// there, before posts go there).

type subscriptionStore struct{ d *Driver }

// Create places the queue (without creating it in the queue listing), so
// that the messages posted later land on the pool that holds the
// subscription.
func (s subscriptionStore) Create(ctx context.Context, q storage.QueueRef, sub storage.Subscription) (id string, created bool, err error) {
	err = s.d.do(ctx, q, true, "", func(r routed) error {
		drv, err := subscriptionsOn(r, true)
		if err != nil {
			return err
		}
		id, created, err = drv.Subscriptions().Create(ctx, q, sub)
		return err
	})
	return id, created, err
}

// Get asks the queue's pool.
func (s subscriptionStore) Get(ctx context.Context, q storage.QueueRef, id string) (sub storage.Subscription, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, false)
		if err != nil {
			return err
		}
		sub, err = drv.Subscriptions().Get(ctx, q, id)
		return err
	})
	return sub, err
}

// List asks the queue's pool.
func (s subscriptionStore) List(ctx context.Context, q storage.QueueRef, o storage.ListSubscriptionsOptions) (subs []storage.Subscription, next string, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, false)
		if err != nil {
			return err
		}
		subs, next, err = drv.Subscriptions().List(ctx, q, o)
		return err
	})
	return subs, next, err
}

// Update asks the queue's pool.
func (s subscriptionStore) Update(ctx context.Context, q storage.QueueRef, id string, u storage.SubscriptionUpdate) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, true)
		if err != nil {
			return err
		}
		return drv.Subscriptions().Update(ctx, q, id, u)
	})
}

// Confirm asks the queue's pool.
func (s subscriptionStore) Confirm(ctx context.Context, q storage.QueueRef, id string, confirmed bool) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, true)
		if err != nil {
			return err
		}
		return drv.Subscriptions().Confirm(ctx, q, id, confirmed)
	})
}

// Delete asks the queue's pool.
func (s subscriptionStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, true)
		if err != nil {
			return err
		}
		return drv.Subscriptions().Delete(ctx, q, id)
	})
}

// Purge asks the queue's pool.
func (s subscriptionStore) Purge(ctx context.Context, q storage.QueueRef) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		drv, err := subscriptionsOn(r, true)
		if err != nil {
			return err
		}
		return drv.Subscriptions().Purge(ctx, q)
	})
}

// subscriptionsOn is where a subscription call goes: during a move, writes
// wait for the target to be prepared, and everything goes there after.
func subscriptionsOn(r routed, write bool) (storage.Driver, error) {
	switch {
	case !r.moving:
		return r.drv, nil
	case r.sealing() && write:
		return nil, errSealing
	case r.sealing():
		return r.drv, nil
	}
	return r.dst, nil
}

type deliveryStore struct{ d *Driver }

// Lease takes due deliveries from every pool, up to limit in all. A pool
// that cannot be reached is skipped; its deliveries wait for it. next is
// the earliest of the pools' answers; a pool not asked (the limit was
// reached first) or not reached may hold due deliveries, so then it is now.
func (s deliveryStore) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	var out []storage.Delivery
	var next time.Time
	var firstErr error
	answered := 0
	for _, drv := range s.d.sources(ctx) {
		if len(out) >= limit {
			next = time.Now()
			break
		}
		got, n, err := drv.Deliveries().Lease(ctx, limit-len(out), hold)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			next = time.Now()
			continue
		}
		answered++
		for _, dl := range got {
			// While its queue moves, a delivery is on both pools (see
			// settle): one lease hands it out once. The copy left held
			// is settled with it.
			if !slices.ContainsFunc(out, func(o storage.Delivery) bool { return o.Queue == dl.Queue && o.ID() == dl.ID() }) {
				out = append(out, dl)
			}
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	if answered == 0 && firstErr != nil {
		return nil, time.Time{}, firstErr
	}
	return out, next, nil
}

// settle runs fn on the delivery's queue's pool and, while the queue
// moves, on the target too: the mover copies the source's pending
// deliveries there, so a delivery sent from either side is settled on
// both, and one acknowledged is not sent again by the other. Each side
// ignores a delivery it does not hold (or holds under another lease).
func (s deliveryStore) settle(ctx context.Context, dl storage.Delivery, fn func(storage.DeliveryStore) error) error {
	r, err := s.d.lookup(ctx, dl.Queue, false, "")
	if err != nil {
		return err
	}
	err = fn(r.drv.Deliveries())
	if r.moving {
		err = errors.Join(err, fn(r.dst.Deliveries()))
	}
	return err
}

// Ack goes to the delivery's queue's pool (both pools while it moves).
func (s deliveryStore) Ack(ctx context.Context, dl storage.Delivery) error {
	return s.settle(ctx, dl, func(ds storage.DeliveryStore) error { return ds.Ack(ctx, dl) })
}

// Retry goes to the delivery's queue's pool (both pools while it moves).
func (s deliveryStore) Retry(ctx context.Context, dl storage.Delivery, at time.Time, errText string) error {
	return s.settle(ctx, dl, func(ds storage.DeliveryStore) error { return ds.Retry(ctx, dl, at, errText) })
}

// Release goes to the delivery's queue's pool (both pools while it moves).
func (s deliveryStore) Release(ctx context.Context, dl storage.Delivery, at time.Time) error {
	return s.settle(ctx, dl, func(ds storage.DeliveryStore) error { return ds.Release(ctx, dl, at) })
}

// Fail goes to the delivery's queue's pool (both pools while it moves).
func (s deliveryStore) Fail(ctx context.Context, dl storage.Delivery, errText string) error {
	return s.settle(ctx, dl, func(ds storage.DeliveryStore) error { return ds.Fail(ctx, dl, errText) })
}

// Stats asks the queue's pool.
func (s deliveryStore) Stats(ctx context.Context, q storage.QueueRef) (storage.DeliveryStats, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return storage.DeliveryStats{}, err
	}
	return drv.Deliveries().Stats(ctx, q)
}

// Pending totals every reachable pool.
func (s deliveryStore) Pending(ctx context.Context) (int64, error) {
	var total int64
	for _, drv := range s.d.sources(ctx) {
		n, err := drv.Deliveries().Pending(ctx)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
