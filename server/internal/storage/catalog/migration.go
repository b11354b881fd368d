package catalog

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"sluice.dev/server/internal/storage"
)

// Migration states (docs/pooling.md, "Moving a queue").
const (
	// StateSealing: recorded; the mover seals the source and prepares the
	// target. Posts and metadata writes wait until the state is moving.
	StateSealing = "sealing"
	// StateMoving: the target is prepared; batches move.
	StateMoving = "moving"
	// StateDone: the placement was switched to the target.
	StateDone = "done"
	// StateFailed: the move stopped before anything was taken and was
	// rolled back; the queue stays on its source.
	StateFailed = "failed"
)

// Migration is the catalog's record of one queue moving between pools. It is
// kept after the move ends, for GET .../migrate, until the queue moves again.
type Migration struct {
	Queue    storage.QueueRef
	From, To string
	State    string
	// Moved counts messages imported on the target; Remaining is the
	// source's message count at the last batch; Batches counts batches.
	Moved, Remaining, Batches int64
	Started                   time.Time
	Finished                  time.Time // zero while active
	Error                     string
	// Owner is the replica running the mover; it holds the move until
	// Lease, renewed per batch. Any replica takes over an expired lease.
	Owner string
	Lease time.Time
}

// Active reports whether the move is still under way.
func (m Migration) Active() bool { return m.State == StateSealing || m.State == StateMoving }

// Migrations is the part of a management store that records moves. Every
// state change is one atomic step on the store, and every change of state
// (not of counters) changes Version, so cached routing learns of it within
// one poll.
type Migrations interface {
	// StartMigration records a move of m.Queue to m.To (state sealing,
	// owner and lease as given; From is filled in from the placement).
	// A move of the queue already under way to the same target is returned
	// as it is, created false. Refusals: NotFound when the queue is not
	// placed; Invalid when it is already on m.To or m.To is not a pool;
	// Conflict when it is moving to another pool.
	StartMigration(ctx context.Context, m Migration) (rec Migration, created bool, err error)
	// GetMigration returns the queue's latest move, or NotFound.
	GetMigration(ctx context.Context, q storage.QueueRef) (Migration, error)
	// LeaseMigration makes owner the mover until lease, if the move is
	// active and its lease is owner's own or expired at now; otherwise
	// Conflict (with the record).
	LeaseMigration(ctx context.Context, q storage.QueueRef, owner string, now, lease time.Time) (Migration, error)
	// UpdateMigration stores m's state, counters, error, lease and
	// finish time if m.Owner still holds the move; Conflict otherwise.
	UpdateMigration(ctx context.Context, m Migration) error
	// SwitchMigration places the queue on the target and ends the move
	// (state done) if owner holds it; switching a done move again is a
	// no-op.
	SwitchMigration(ctx context.Context, q storage.QueueRef, owner string, finished time.Time) error
	// ActiveMigrations lists the moves under way.
	ActiveMigrations(ctx context.Context) ([]Migration, error)
	// QueuesOn lists up to limit queues placed on pool, in key order,
	// after the key `after` ("" from the start).
	QueuesOn(ctx context.Context, pool, after string, limit int) ([]storage.QueueRef, error)
}

// Migration returns q's move as this replica's cache knows it: active moves
// only, as of the last poll.
func (c *Catalog) Migration(q storage.QueueRef) (Migration, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.moving[q]
	return m, ok
}

// ReloadMigration reads q's move from the store now and updates the cache:
// what a replica does when a backend tells it the queue moved, rather than
// waiting for its poll. The placement is dropped from the cache too.
func (c *Catalog) ReloadMigration(ctx context.Context, q storage.QueueRef) (Migration, bool, error) {
	m, err := c.store.GetMigration(ctx, q)
	if err != nil && !storage.Is(err, storage.NotFound) {
		return Migration{}, false, err
	}
	c.mu.Lock()
	delete(c.placed, q)
	if err == nil && m.Active() {
		c.moving[q] = m
	} else {
		delete(c.moving, q)
	}
	c.mu.Unlock()
	return m, err == nil && m.Active(), nil
}

// StartMigration validates and records a move of q to pool (see
// Migrations.StartMigration) and updates the cache at once.
func (c *Catalog) StartMigration(ctx context.Context, q storage.QueueRef, to, owner string, lease time.Duration) (Migration, bool, error) {
	const op = "catalog.migrate"
	if !ValidName(to) {
		return Migration{}, false, storage.E(op, storage.Invalid, storage.Public(fmt.Sprintf("pool name %q is not valid", to)))
	}
	now := time.Now()
	m, created, err := c.store.StartMigration(ctx, Migration{Queue: q, To: to, State: StateSealing,
		Started: now, Owner: owner, Lease: now.Add(lease)})
	if err != nil {
		return m, false, err
	}
	_, _, err = c.ReloadMigration(ctx, q)
	return m, created, err
}

// QueuesOn lists the queues placed on pool, a page at a time; the marker is
// opaque (the last key of the previous page).
func (c *Catalog) QueuesOn(ctx context.Context, pool, marker string, limit int) ([]storage.QueueRef, string, error) {
	after := ""
	if marker != "" {
		b, err := base64.RawURLEncoding.DecodeString(marker)
		if err != nil {
			return nil, "", storage.E("catalog.queues", storage.Invalid, storage.Public("marker is not valid"))
		}
		after = string(b)
	}
	qs, err := c.store.QueuesOn(ctx, pool, after, limit)
	if err != nil || len(qs) < limit {
		return qs, "", err
	}
	return qs, base64.RawURLEncoding.EncodeToString([]byte(placementKey(qs[len(qs)-1]))), nil
}

// parseKey splits a placement key back into its queue.
func parseKey(key string) storage.QueueRef {
	for i := 0; i < len(key); i++ {
		if key[i] == '\n' {
			return storage.QueueRef{Project: key[:i], Name: key[i+1:]}
		}
	}
	return storage.QueueRef{Name: key}
}

// busy is the Conflict of moving a queue that is moving elsewhere.
func busy(op string, m Migration) error {
	return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf("queue %s is already moving to pool %s (state %s)", m.Queue.Name, m.To, m.State)))
}

// leaseHeld is the Conflict of acting on a move another replica holds.
func leaseHeld(op string, m Migration) error {
	return storage.E(op, storage.Conflict, fmt.Sprintf("move of %s is held by %s until %s (state %s)", m.Queue.Name, m.Owner, m.Lease.Format(time.RFC3339Nano), m.State))
}

// startRefusal turns a store's answer to StartMigration into its error.
func startRefusal(op string, m Migration, answer, current string) error {
	switch answer {
	case "nf":
		return storage.E(op, storage.NotFound, storage.Public("queue "+m.Queue.Name+" does not exist"))
	case "same":
		return storage.E(op, storage.Invalid, storage.Public(fmt.Sprintf("queue %s is already on pool %s", m.Queue.Name, current)))
	case "nopool":
		return storage.E(op, storage.Invalid, storage.Public(fmt.Sprintf("pool %s is not registered", m.To)))
	case "busy":
		return storage.E(op, storage.Conflict, storage.Public(fmt.Sprintf("queue %s is already moving to another pool", m.Queue.Name)))
	}
	return nil
}

// checkUpdate refuses updates only a switch may make.
func checkUpdate(op string, m Migration) error {
	switch m.State {
	case StateSealing, StateMoving, StateFailed:
		return nil
	}
	return storage.E(op, storage.Invalid, fmt.Sprintf("state %q cannot be set by an update (done is set by the switch)", m.State))
}

// Poll is how often this replica's cache is refreshed: the longest it
// routes with a move's state older than the store's.
func (c *Catalog) Poll() time.Duration { return c.opts.Refresh }
