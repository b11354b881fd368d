package pooling

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// How a call reacts to a queue that moves (docs/pooling.md, "Moving a
// queue"). A source answering Moved means this replica's view is older than
// the move: it reloads the move from the catalog and tries again, a few
// times. Moving (a batch in transit) and a move still sealing are short
// states: the call waits, backing off, and past movingWait answers 503.
const (
	movedRetries = 3
	movingWait   = 2 * time.Second
	firstBackoff = 2 * time.Millisecond
	maxBackoff   = 20 * time.Millisecond
)

// errSealing: the call writes what the mover is copying from the source
// (posts, metadata, subscriptions), so it waits until the target is
// prepared.
var errSealing = storage.E("pooling.route", storage.Unavailable, storage.ErrMoving)

// routed is where one call goes.
type routed struct {
	drv  storage.Driver // the queue's pool (the source, during a move)
	pool string
	// During a move: the record as this replica knows it and the target.
	moving bool
	mig    catalog.Migration
	dst    storage.Driver
}

func (r routed) sealing() bool { return r.moving && r.mig.State == catalog.StateSealing }

// lookup routes q and adds the move under way, if any.
func (d *Driver) lookup(ctx context.Context, q storage.QueueRef, create bool, flavor string) (routed, error) {
	drv, pool, err := d.route(ctx, q, create, flavor)
	if err != nil {
		return routed{}, err
	}
	r := routed{drv: drv, pool: pool}
	if m, ok := d.cat.Migration(q); ok && pool == m.From {
		dst, err := d.pool(ctx, m.To)
		if err != nil {
			return routed{}, err
		}
		r.moving, r.mig, r.dst = true, m, dst
	}
	return r, nil
}

// do runs fn on q's routing and retries it as the move requires.
func (d *Driver) do(ctx context.Context, q storage.QueueRef, create bool, flavor string, fn func(r routed) error) error {
	reloads, wait := 0, firstBackoff
	deadline := time.Now().Add(movingWait)
	for {
		r, err := d.lookup(ctx, q, create, flavor)
		if err == nil {
			err = fn(r)
		}
		switch {
		case err == nil:
			return nil
		case movedErr(err) && reloads < movedRetries:
			reloads++
			if _, _, rerr := d.cat.ReloadMigration(ctx, q); rerr != nil {
				return storage.E("pooling.route", storage.Unavailable, fmt.Errorf("catalog: %w", rerr))
			}
			continue
		case movedErr(err):
			// The catalog and the backends disagree for longer than a
			// reload fixes (a switch being written): a retry will do.
			return storage.E("pooling.route", storage.Unavailable, storage.ErrMoving)
		case errors.Is(err, storage.ErrMoving) && time.Now().Before(deadline):
			if err == errSealing {
				// Learn of the target being prepared without waiting
				// for the catalog poll.
				if _, _, rerr := d.cat.ReloadMigration(ctx, q); rerr != nil {
					return storage.E("pooling.route", storage.Unavailable, fmt.Errorf("catalog: %w", rerr))
				}
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(wait/2 + rand.N(wait/2+1)):
				// Jittered: a claim waiting on a batch in transit gets
				// in during one of the mover's gaps between batches.
			}
			wait = min(wait*2, maxBackoff)
			continue
		}
		return err
	}
}

// movedErr reports a source's Moved answer.
func movedErr(err error) bool {
	_, ok := storage.MovedTo(err)
	return ok
}

// elsewhere reports an answer that sends the call on to the target: the
// source no longer holds what the call names.
func elsewhere(err error) bool { return movedErr(err) || storage.Is(err, storage.NotFound) }

// bothWays runs a call that is idempotent and harmless where its subject is
// absent (deletes) on the source, then on the target.
func bothWays(r routed, src, dst func(storage.Driver) error) error {
	if err := src(r.drv); err != nil && !movedErr(err) {
		return err
	}
	return dst(r.dst)
}

// sumStats adds the source's and target's counts: the source holds the
// older messages, the target the newer.
func sumStats(a, b storage.QueueStats) storage.QueueStats {
	out := storage.QueueStats{Free: a.Free + b.Free, Claimed: a.Claimed + b.Claimed, Total: a.Total + b.Total,
		Oldest: a.Oldest, Newest: b.Newest}
	if out.Oldest == nil {
		out.Oldest = b.Oldest
	}
	if out.Newest == nil {
		out.Newest = a.Newest
	}
	return out
}

// refuseWhileMoving is the Conflict of calls that cannot run during a move.
func refuseWhileMoving(op string, r routed, what string) error {
	return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf("queue %s is moving to pool %s; %s when the move is done",
		r.mig.Queue.Name, r.mig.To, what)))
}
