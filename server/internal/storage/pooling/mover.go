package pooling

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// MoverOptions tune the mover, the part of the pooled driver that moves a
// queue between pools (docs/pooling.md, "Moving a queue").
type MoverOptions struct {
	// Batch is the most messages one Take moves (default 100). It bounds
	// how long one step holds a backend (on Redis, one script: every
	// other client waits meanwhile).
	Batch int
	// Rate caps messages moved per second by one mover (0 or negative, the
	// default: no cap). With Batch it bounds the extra load a move puts on
	// both pools.
	Rate int
	// Lease is how long a mover holds a move without renewing it (default
	// 10 s). A replica that dies mid-move leaves it for this long at most
	// before another takes over.
	Lease time.Duration
	// Scan is how often expired leases are looked for (default Lease/2).
	Scan time.Duration
	// Tombstone is how long a finished source answers Moved (default 1 h,
	// far above any placement cache).
	Tombstone time.Duration
	// Owner names this replica in the leases (default host-pid-random).
	Owner string
}

func (o MoverOptions) withDefaults() MoverOptions {
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Lease <= 0 {
		o.Lease = 10 * time.Second
	}
	if o.Scan <= 0 {
		o.Scan = o.Lease / 2
	}
	if o.Tombstone <= 0 {
		o.Tombstone = time.Hour
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	return o
}

// Mover runs the moves this replica started and takes over moves whose
// mover died (lease expired).
type Mover struct {
	d    *Driver
	opts MoverOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[storage.QueueRef]bool
}

// StartMover starts the driver's mover; Stop (or the driver's Close) ends
// it. Every replica runs one, so any replica resumes a move.
func (d *Driver) StartMover(opts MoverOptions) *Mover {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mover{d: d, opts: opts.withDefaults(), ctx: ctx, cancel: cancel, running: map[storage.QueueRef]bool{}}
	d.mu.Lock()
	d.mover = m
	d.mu.Unlock()
	m.wg.Add(1)
	go m.scan()
	return m
}

// Stop ends the mover at once, wherever its moves are: what a crash does,
// short of the process exit. Leases lapse and another replica resumes.
func (m *Mover) Stop() {
	m.cancel()
	m.wg.Wait()
}

// Migrate starts moving q to pool, or returns the move of q to pool
// already under way. A dead-letter queue q names on q's pool is moved to
// pool too (first; see bringDeadLetter). Refusals: the catalog's (see
// catalog.Migrations.StartMigration), NotFound when the queue is not
// placed on any pool, Conflict for a dead-letter queue on a third pool or moving to
// another, Invalid when a pool's driver cannot move queues.
func (m *Mover) Migrate(ctx context.Context, q storage.QueueRef, pool string) (catalog.Migration, error) {
	return m.migrate(ctx, q, pool, 0)
}

// maxDeadLetterChain bounds how many dead-letter queues one move brings
// along (a queue's, its dead-letter queue's, ...); it also ends a cycle.
const maxDeadLetterChain = 4

func (m *Mover) migrate(ctx context.Context, q storage.QueueRef, pool string, chain int) (catalog.Migration, error) {
	const op = "pooling.migrate"
	if rec, ok := m.d.cat.Migration(q); ok && rec.To == pool {
		return rec, nil
	}
	r, err := m.d.lookup(ctx, q, false, "")
	if err != nil {
		return catalog.Migration{}, err
	}
	if r.pool == "" {
		return catalog.Migration{}, storage.E(op, storage.NotFound, storage.Public("queue "+q.Name+" does not exist"))
	}
	if !r.moving {
		// A queue placed on its pool without existing there is a
		// dead-letter queue no message reached yet. It is created, so it
		// moves like any queue: a dead letter arriving meanwhile lands in
		// it and moves with it (placement alone would strand it).
		if _, err := r.drv.Queues().Create(ctx, q, nil); err != nil {
			return catalog.Migration{}, err
		}
		meta, err := r.drv.Queues().GetMetadata(ctx, q)
		if err != nil {
			return catalog.Migration{}, err
		}
		if dlq := deadLetterOf(meta); dlq != "" && dlq != q.Name {
			if err := m.bringDeadLetter(ctx, q, storage.QueueRef{Project: q.Project, Name: dlq}, r.pool, pool, chain); err != nil {
				return catalog.Migration{}, err
			}
		}
		if _, ok := r.drv.(storage.Migrator); !ok {
			return catalog.Migration{}, storage.E(op, storage.Invalid, storage.Public("the pool of queue "+q.Name+" cannot move queues"))
		}
		if _, ok := m.d.cat.PoolURI(ctx, pool); ok {
			// A target that cannot be reached now is refused (503)
			// rather than recorded: the queue's posts would wait on it.
			dst, err := m.d.pool(ctx, pool)
			if err == nil {
				err = dst.Ping(ctx)
			}
			if err != nil {
				return catalog.Migration{}, err
			}
			if _, ok := dst.(storage.Migrator); !ok {
				return catalog.Migration{}, storage.E(op, storage.Invalid, storage.Public("pool "+pool+" cannot receive queues"))
			}
			// (A move to the queue's own pool is refused as such below.)
			if r.pool != pool {
				if err := oneStorage(ctx, r.drv, dst, r.pool, pool); err != nil {
					return catalog.Migration{}, err
				}
			}
		}
	}
	rec, created, err := m.d.cat.StartMigration(ctx, q, pool, m.opts.Owner, m.opts.Lease)
	if err != nil {
		return rec, err
	}
	if created {
		m.launch(rec)
	}
	return rec, nil
}

// oneStorage refuses a move between two pools that reach one database
// (their storage ids agree, whatever their URIs say): the copy would land
// on the queue itself, and finishing the move would then remove it.
func oneStorage(ctx context.Context, src, dst storage.Driver, from, to string) error {
	a, err := src.(storage.Migrator).Migrations().StorageID(ctx)
	if err != nil {
		return err
	}
	b, err := dst.(storage.Migrator).Migrations().StorageID(ctx)
	if err != nil {
		return err
	}
	if a == b {
		return storage.E("pooling.migrate", storage.Conflict, storage.Public(
			"pools "+from+" and "+to+" are one storage (the same database): a queue cannot move between them"))
	}
	return nil
}

// bringDeadLetter makes sure q's dead-letter queue dlq ends up on pool with
// q: a queue and its dead-letter queue share a pool, since dead-lettering
// happens inside one backend. One on q's pool moves there first; until
// both are on pool, claims on q keep exhausted messages instead of
// dead-lettering them (claimStore.Create).
func (m *Mover) bringDeadLetter(ctx context.Context, q, dlq storage.QueueRef, from, pool string, chain int) error {
	const op = "pooling.migrate"
	if rec, ok := m.d.cat.Migration(dlq); ok {
		if rec.To == pool {
			return nil
		}
		return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf(
			"queue %s sends dead letters to queue %s, which is moving to pool %s; move %s there instead", q.Name, dlq.Name, rec.To, q.Name)))
	}
	at, err := m.d.cat.Store().Place(ctx, dlq, from)
	if err != nil {
		return err
	}
	switch {
	case at == pool:
		return nil
	case at != from:
		return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf(
			"queue %s sends dead letters to queue %s on pool %s, neither %s nor %s", q.Name, dlq.Name, at, from, pool)))
	case chain >= maxDeadLetterChain:
		return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf(
			"queue %s: more than %d dead-letter queues chained; move them one by one", q.Name, maxDeadLetterChain)))
	}
	_, err = m.migrate(ctx, dlq, pool, chain+1)
	return err
}

// launch runs rec's move in the background unless this replica runs it.
func (m *Mover) launch(rec catalog.Migration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[rec.Queue] || m.ctx.Err() != nil {
		return
	}
	m.running[rec.Queue] = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.running, rec.Queue)
			m.mu.Unlock()
		}()
		if err := m.run(rec); err != nil && m.ctx.Err() == nil {
			m.d.log.Warn("queue move stopped; it resumes when its lease expires", "queue", rec.Queue.Name,
				"project", rec.Queue.Project, "from", rec.From, "to", rec.To, "err", err)
		}
	}()
}

// scan takes over moves whose lease expired (their replica died, or a
// step failed and its mover gave up).
func (m *Mover) scan() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.Scan)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.opts.Scan)
		active, err := m.d.cat.Store().ActiveMigrations(ctx)
		cancel()
		if err != nil {
			continue
		}
		now := time.Now()
		for _, rec := range active {
			if rec.Lease.Before(now) || rec.Owner == m.opts.Owner {
				m.launch(rec)
			}
		}
	}
}

// Mover returns the driver's mover, nil before StartMover.
func (d *Driver) Mover() *Mover {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.mover
}

// Catalog returns the catalog the driver routes by.
func (d *Driver) Catalog() *catalog.Catalog { return d.cat }
