package pooling

import (
	"context"
	"time"

	"sluice.dev/server/internal/storage"
)

type claimStore struct{ d *Driver }

// Create claims on the queue's pool. With a dead-letter policy the
// dead-letter queue is placed on the same pool first (the move happens
// inside that pool's backend).
func (s claimStore) Create(ctx context.Context, q storage.QueueRef, o storage.ClaimOptions) (storage.Claim, error) {
	drv, pool, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return storage.Claim{}, err
	}
	if o.DeadLetter.Active() && pool != "" {
		if err := s.d.placeWith(ctx, storage.QueueRef{Project: q.Project, Name: o.DeadLetter.Queue}, q, pool); err != nil {
			return storage.Claim{}, err
		}
	}
	return drv.Claims().Create(ctx, q, o)
}

// Get asks the queue's pool.
func (s claimStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Claim, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return storage.Claim{}, err
	}
	return drv.Claims().Get(ctx, q, id)
}

// Update asks the queue's pool.
func (s claimStore) Update(ctx context.Context, q storage.QueueRef, id string, ttl, grace time.Duration) error {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	return drv.Claims().Update(ctx, q, id, ttl, grace)
}

// Delete asks the queue's pool.
func (s claimStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	return drv.Claims().Delete(ctx, q, id)
}
