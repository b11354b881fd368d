package pooling

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// run drives one move from its recorded state to the end. Every step is
// idempotent, so it is also how a move resumes after its mover died.
func (m *Mover) run(rec catalog.Migration) error {
	st, q := m.d.cat.Store(), rec.Queue
	now := time.Now()
	rec, err := st.LeaseMigration(m.ctx, q, m.opts.Owner, now, now.Add(m.opts.Lease))
	if storage.Is(err, storage.Conflict) {
		return nil // another replica runs it, or it ended
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	go m.keepLease(ctx, cancel, q)
	src, dst, err := m.migrators(ctx, rec)
	if err != nil && rec.State == catalog.StateSealing && src != nil {
		// The target went away before it was prepared: roll back rather
		// than keep the queue's posts waiting on it.
		_, err = m.rollBack(ctx, rec, src, err)
		return err
	}
	if err != nil {
		return err
	}
	if rec.State == catalog.StateSealing {
		if rec, err = m.seal(ctx, rec, src, dst); err != nil || rec.State != catalog.StateMoving {
			return err
		}
	}
	if rec, err = m.moveAll(ctx, rec, src, dst); err != nil {
		return err
	}
	if err := m.moveDeliveries(ctx, rec, src, dst); err != nil {
		return err
	}
	// Finish and Done come before the switch: a mover that dies after the
	// switch leaves nothing undone, since a done move is never resumed.
	// Until the switch, replicas route the queue as moving, and a
	// finished source's Moved answers send them to the target.
	if err := src.Finish(ctx, q, m.opts.Tombstone); err != nil {
		return fmt.Errorf("finish on %s: %w", rec.From, err)
	}
	if err := dst.Done(ctx, q); err != nil {
		return fmt.Errorf("done on %s: %w", rec.To, err)
	}
	if err := st.SwitchMigration(ctx, q, m.opts.Owner, time.Now()); err != nil {
		return err
	}
	_, _, err = m.d.cat.ReloadMigration(ctx, q)
	m.d.log.Info("queue moved", "queue", q.Name, "project", q.Project, "from", rec.From, "to", rec.To,
		"messages", rec.Moved, "batches", rec.Batches, "took", time.Since(rec.Started).String())
	return err
}

// keepLease renews the lease while the move runs, whatever step it is
// in; when another replica took the move over, it stops this run.
func (m *Mover) keepLease(ctx context.Context, stop context.CancelFunc, q storage.QueueRef) {
	t := time.NewTicker(m.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		_, err := m.d.cat.Store().LeaseMigration(ctx, q, m.opts.Owner, now, now.Add(m.opts.Lease))
		if storage.Is(err, storage.Conflict) {
			stop()
			return
		}
	}
}

// migrators opens both pools' migration stores; when only the target
// fails, the source comes back with the error.
func (m *Mover) migrators(ctx context.Context, rec catalog.Migration) (src, dst storage.MigrationStore, err error) {
	for _, side := range []struct {
		pool string
		out  *storage.MigrationStore
	}{{rec.From, &src}, {rec.To, &dst}} {
		drv, err := m.d.pool(ctx, side.pool)
		if err != nil {
			return src, nil, err
		}
		mg, ok := drv.(storage.Migrator)
		if !ok {
			return src, nil, storage.E("pooling.migrate", storage.Invalid, "pool "+side.pool+" cannot move queues")
		}
		*side.out = mg.Migrations()
	}
	return src, dst, nil
}

// seal seals the source and prepares the target (steps 2 and 3). A
// failure here rolls the move back: nothing was taken yet.
func (m *Mover) seal(ctx context.Context, rec catalog.Migration, src, dst storage.MigrationStore) (catalog.Migration, error) {
	// Every replica routes the queue as moving within one catalog poll
	// of the record; sealing sooner would let a replica that has not seen
	// it write metadata to the source after Seal read it.
	if wait := time.Until(rec.Started.Add(2*m.d.cat.Poll() + 100*time.Millisecond)); wait > 0 {
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(wait):
		}
	}
	q := rec.Queue
	sealed, err := src.Seal(ctx, q, rec.To)
	if err == nil && !sealed.Exists {
		err = storage.E("pooling.migrate", storage.NotFound, "the queue no longer exists on its pool")
	}
	if err == nil {
		err = m.copySubscriptions(ctx, rec)
	}
	if err == nil {
		err = dst.Prepare(ctx, q, sealed.Metadata, sealed.Seq)
	}
	if err != nil {
		return m.rollBack(ctx, rec, src, err)
	}
	rec.State, rec.Lease = catalog.StateMoving, time.Now().Add(m.opts.Lease)
	if err := m.d.cat.Store().UpdateMigration(ctx, rec); err != nil {
		return rec, err
	}
	_, _, err = m.d.cat.ReloadMigration(ctx, q)
	return rec, err
}

// rollBack unseals the source and records the move as failed. When the
// source cannot be unsealed the move stays as it is, to be resumed.
func (m *Mover) rollBack(ctx context.Context, rec catalog.Migration, src storage.MigrationStore, cause error) (catalog.Migration, error) {
	// Only the holder may unseal: a mover that lost its lease while
	// sealing would otherwise unseal under the replica that took over and
	// already moves batches. A fresh lease cannot be taken over before it
	// expires, which Unseal does not outlast.
	now := time.Now()
	if _, err := m.d.cat.Store().LeaseMigration(ctx, rec.Queue, m.opts.Owner, now, now.Add(m.opts.Lease)); err != nil {
		return rec, fmt.Errorf("%v; not rolled back: %w", cause, err)
	}
	if err := src.Unseal(ctx, rec.Queue); err != nil {
		return rec, fmt.Errorf("%v; and unsealing the source: %w", cause, err)
	}
	rec.State, rec.Error, rec.Finished = catalog.StateFailed, cause.Error(), time.Now()
	if err := m.d.cat.Store().UpdateMigration(ctx, rec); err != nil {
		return rec, err
	}
	_, _, err := m.d.cat.ReloadMigration(ctx, rec.Queue)
	return rec, err
}

// copySubscriptions creates the source's subscriptions on the target, so
// posts there (from the next state on) record their deliveries. Each keeps
// its id, which its clients hold (to confirm, update or delete it, or as a
// listing's marker), and its ttl and expiry, so its age goes on; creating
// one twice (a resumed move) returns the existing one.
func (m *Mover) copySubscriptions(ctx context.Context, rec catalog.Migration) error {
	from, err := m.d.pool(ctx, rec.From)
	if err != nil {
		return err
	}
	to, err := m.d.pool(ctx, rec.To)
	if err != nil {
		return err
	}
	marker := ""
	for page := 0; page < 10000; page++ {
		subs, next, err := from.Subscriptions().List(ctx, rec.Queue, storage.ListSubscriptionsOptions{Marker: marker, Limit: 100})
		if err != nil {
			return fmt.Errorf("list subscriptions: %w", err)
		}
		for _, sub := range subs {
			if !sub.Expires.After(time.Now()) {
				continue
			}
			id, _, err := to.Subscriptions().Create(ctx, rec.Queue, sub)
			if err != nil {
				return fmt.Errorf("copy subscription %s: %w", sub.ID, err)
			}
			if sub.Confirmed {
				if err := to.Subscriptions().Confirm(ctx, rec.Queue, id, true); err != nil {
					return fmt.Errorf("confirm subscription %s: %w", id, err)
				}
			}
		}
		if next == "" || len(subs) == 0 {
			return nil
		}
		marker = next
	}
	return nil
}

// moveDeliveries (step 5) records the source's pending notification
// deliveries on the target before Finish drops them there: a notification
// whose queue moved is still sent. Until the switch both sides may hand one out; the
// pooled driver settles a delivery on both, so one sent is not sent again
// (see deliveryStore). A run resumed after Finish finds none to copy.
func (m *Mover) moveDeliveries(ctx context.Context, rec catalog.Migration, src, dst storage.MigrationStore) error {
	err := src.Deliveries(ctx, rec.Queue, m.opts.Batch, func(ds []storage.MovedDelivery) error {
		if err := dst.ImportDeliveries(ctx, rec.Queue, ds); err != nil {
			return fmt.Errorf("import deliveries on %s: %w", rec.To, err)
		}
		return nil
	})
	if err != nil && !movedErr(err) {
		return fmt.Errorf("deliveries on %s: %w", rec.From, err)
	}
	return m.moveDeliveryCounts(ctx, rec, dst)
}

// moveDeliveryCounts adds the source's running counts of notifications
// sent and given up to the target's, so a queue's delivery stats do not
// start again from zero when it moves. The token names the move, so a
// resumed mover adds nothing twice. What the source counts between this
// and Finish (deliveries it sends meanwhile) is not carried.
func (m *Mover) moveDeliveryCounts(ctx context.Context, rec catalog.Migration, dst storage.MigrationStore) error {
	drv, err := m.d.pool(ctx, rec.From)
	if err != nil {
		return err
	}
	st, err := drv.Deliveries().Stats(ctx, rec.Queue)
	if movedErr(err) {
		return nil // finished: the counts were added before Finish
	}
	if err != nil {
		return fmt.Errorf("delivery stats on %s: %w", rec.From, err)
	}
	token := rec.From + "@" + strconv.FormatInt(rec.Started.Unix(), 10)
	if err := dst.ImportDeliveryCounts(ctx, rec.Queue, st, token); err != nil {
		return fmt.Errorf("import delivery counts on %s: %w", rec.To, err)
	}
	return nil
}

// moveAll moves batches until the source is empty (step 4), starting with a
// batch a dead mover left in transit. The lease is renewed per batch; a
// mover that lost it stops.
func (m *Mover) moveAll(ctx context.Context, rec catalog.Migration, src, dst storage.MigrationStore) (catalog.Migration, error) {
	q := rec.Queue
	b, err := src.InTransit(ctx, q)
	if movedErr(err) { // finished already: a mover died before the switch
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("in transit on %s: %w", rec.From, err)
	}
	start, movedHere := time.Now(), 0
	var recorded time.Time // when the progress was last written to the catalog
	free := false          // the source had free messages then
	settleTaker, _ := src.(storage.SettleTaker)
	for {
		var next *storage.Batch // taken with the settle
		if !b.Empty() {
			if err := dst.Import(ctx, q, b); err != nil {
				return rec, fmt.Errorf("import on %s: %w", rec.To, err)
			}
			// While the source has free messages and no rate is kept,
			// nothing needs to happen between settling a batch and
			// taking the next: one round trip does both, where the
			// source can.
			if settleTaker != nil && free && m.opts.Rate <= 0 {
				nb, err := settleTaker.SettleAndTake(ctx, q, b, m.opts.Batch)
				if movedErr(err) { // finished already, as for Take below
					return rec, nil
				}
				if err != nil {
					return rec, fmt.Errorf("settle and take on %s: %w", rec.From, err)
				}
				next = &nb
			} else if err := src.Settle(ctx, q, b); err != nil {
				return rec, fmt.Errorf("settle on %s: %w", rec.From, err)
			}
			rec.Moved += int64(len(b.Messages))
			rec.Batches++
			movedHere += len(b.Messages)
			// The source's stats and the progress in the catalog are
			// refreshed at most every progressEvery: small batches keep
			// each script on the backends short, and two more round trips
			// per batch would cost nearly as much as the batch. The lease
			// does not depend on it (keepLease renews it).
			if time.Since(recorded) >= progressEvery {
				free = false
				if drv, err := m.d.pool(ctx, rec.From); err == nil {
					if s, err := drv.Queues().Stats(ctx, q); err == nil {
						rec.Remaining, free = int64(s.Total), s.Free > 0
					}
				}
				rec.Lease = time.Now().Add(m.opts.Lease)
				if err := m.d.cat.Store().UpdateMigration(ctx, rec); err != nil {
					return rec, err
				}
				recorded = time.Now()
			}
			gap := batchGap
			if free || next != nil {
				gap = 0
			}
			if err := m.pace(ctx, start, movedHere, gap); err != nil {
				return rec, err
			}
		}
		if next != nil {
			b = *next
		} else if b, err = src.Take(ctx, q, m.opts.Batch); movedErr(err) {
			return rec, nil
		} else if err != nil {
			return rec, fmt.Errorf("take on %s: %w", rec.From, err)
		}
		if b.Empty() {
			rec.Remaining = 0
			if movedHere == 0 {
				return rec, nil
			}
			// The last counters, which the switch does not write.
			rec.Lease = time.Now().Add(m.opts.Lease)
			return rec, m.d.cat.Store().UpdateMigration(ctx, rec)
		}
	}
}

// progressEvery is how often a running move reads the source's stats and
// writes its counters (messages moved, batches, remaining) to the catalog.
const progressEvery = 100 * time.Millisecond

// batchGap is the least pause between batches once the source has no
// free message left (or its stats failed), as last read. Then, while a
// batch is in transit, the source answers claims with Moving (they would
// skip past the batch to the target); without a gap a mover at full speed
// would keep claims waiting for the rest of the move. While free messages
// remain, claims take them beside the batch and the mover need not pause.
const batchGap = 5 * time.Millisecond

// pace sleeps so that this run moves at most Rate messages per second, and
// at least gap after every batch.
func (m *Mover) pace(ctx context.Context, start time.Time, moved int, gap time.Duration) error {
	wait := gap
	if m.opts.Rate > 0 {
		due := start.Add(time.Duration(float64(moved) / float64(m.opts.Rate) * float64(time.Second)))
		wait = max(wait, time.Until(due))
	}
	if wait <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}
