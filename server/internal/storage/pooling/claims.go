package pooling

import (
	"context"
	"errors"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

type claimStore struct{ d *Driver }

// Create claims on the queue's pool. With a dead-letter policy the
// dead-letter queue is placed on the same pool first (the move happens
// inside that pool's backend). During a move it claims on the source (the
// older messages) and only when that finds none on the target: a claim
// lives on one backend, so a claim from the source may hold fewer messages
// than asked, as any claim may.
func (s claimStore) Create(ctx context.Context, q storage.QueueRef, o storage.ClaimOptions) (c storage.Claim, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		o := o
		if o.DeadLetter.Active() && r.pool != "" {
			together, err := s.d.withDeadLetter(ctx, q, r, o.DeadLetter.Queue)
			if err != nil {
				return err
			}
			if !together {
				o.DeadLetter = nil
			}
		}
		c, err = r.drv.Claims().Create(ctx, q, o)
		if r.moving && (movedErr(err) || err == nil && len(c.Messages) == 0) {
			c, err = r.dst.Claims().Create(ctx, q, o)
		}
		return err
	})
	return c, err
}

// Get asks the queue's pool; during a move, the source, then the target.
func (s claimStore) Get(ctx context.Context, q storage.QueueRef, id string) (c storage.Claim, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		c, err = r.drv.Claims().Get(ctx, q, id)
		if r.moving && elsewhere(err) {
			c, err = r.dst.Claims().Get(ctx, q, id)
		}
		return err
	})
	return c, err
}

// Update asks the queue's pool; during a move, the source, then the target.
func (s claimStore) Update(ctx context.Context, q storage.QueueRef, id string, ttl, grace time.Duration) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		err := r.drv.Claims().Update(ctx, q, id, ttl, grace)
		if r.moving && elsewhere(err) {
			err = r.dst.Claims().Update(ctx, q, id, ttl, grace)
		}
		return err
	})
}

// Delete asks the queue's pool; during a move, both (releasing an absent
// claim is not an error).
func (s claimStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		if !r.moving {
			return r.drv.Claims().Delete(ctx, q, id)
		}
		del := func(drv storage.Driver) error { return drv.Claims().Delete(ctx, q, id) }
		return bothWays(r, del, del)
	})
}

// withDeadLetter places q's dead-letter queue on q's pool and reports
// whether dead letters can go there now. Not while either queue moves, nor
// when the dead-letter queue was moved away from q's pool and q has yet to
// follow (Mover.bringDeadLetter): then the claim keeps its exhausted
// messages, as a claim whose dead-letter queue is unavailable does, so
// nothing is lost or stranded on a pool the queue is leaving;
// dead-lettering resumes when the two are together again. A dead-letter
// queue on another pool for any other reason is the caller's mistake
// (ErrDeadLetterPool), said rather than silently ignored.
func (d *Driver) withDeadLetter(ctx context.Context, q storage.QueueRef, r routed, name string) (bool, error) {
	dlq := storage.QueueRef{Project: q.Project, Name: name}
	if _, moving := d.cat.Migration(dlq); moving || r.moving {
		return false, nil
	}
	err := d.placeWith(ctx, dlq, q, r.pool)
	if !errors.Is(err, storage.ErrDeadLetterPool) {
		return err == nil, err
	}
	// Apart: only a move of the dead-letter queue away from here (a
	// catalog read, on this rare path only) keeps the claim going.
	if m, merr := d.cat.Store().GetMigration(ctx, dlq); merr == nil && m.State == catalog.StateDone && m.From == r.pool {
		return false, nil
	}
	return false, err
}
