// Package memory is an in-process storage driver: the reference
// implementation of the storage semantics, used by tests and by
// `sluice-server --store memory`. Nothing survives a restart.
//
// Each queue has its own mutex, so traffic on different queues never
// contends; the driver-wide lock is only taken to find or create a queue.
// Every per-message operation is O(log n) in the queue's size.
package memory

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"sluice.dev/server/internal/storage"
)

func init() {
	storage.Register("memory", func(_ context.Context, _ *url.URL, opts storage.Options) (storage.Driver, error) {
		return New(opts), nil
	})
}

// Driver is the memory driver. It implements storage.Driver,
// storage.DepthReporter, storage.Inspector and storage.Migrator.
type Driver struct {
	clock  storage.Clock
	events storage.Events

	notif *notifier

	mu       sync.RWMutex
	queues   map[storage.QueueRef]*queue
	projects map[string][]string // queue names per project, sorted

	// Queues taking part in a move (migrate.go); nMoves counts them so the
	// usual case, none, costs calls one atomic load.
	mvMu   sync.Mutex
	moves  map[storage.QueueRef]*move
	nMoves atomic.Int64
}

// New returns an empty memory driver.
func New(opts storage.Options) *Driver {
	opts = opts.WithDefaults()
	return &Driver{
		clock:    opts.Clock,
		events:   opts.Events,
		notif:    newNotifier(),
		queues:   map[storage.QueueRef]*queue{},
		projects: map[string][]string{},
		moves:    map[storage.QueueRef]*move{},
	}
}

// Queues returns the queue store.
func (d *Driver) Queues() storage.QueueStore { return queueStore{d} }

// Messages returns the message store.
func (d *Driver) Messages() storage.MessageStore { return messageStore{d} }

// Claims returns the claim store.
func (d *Driver) Claims() storage.ClaimStore { return claimStore{d} }

// Subscriptions returns the subscription store.
func (d *Driver) Subscriptions() storage.SubscriptionStore { return subscriptionStore{d} }

// Deliveries returns the delivery store.
func (d *Driver) Deliveries() storage.DeliveryStore { return deliveryStore{d} }

// Ping always succeeds: the data is in this process.
func (d *Driver) Ping(context.Context) error { return nil }

// Close does nothing; the data lives as long as the Driver value.
func (d *Driver) Close() error { return nil }

// lock returns the queue locked and advanced to now, or nil when it does not
// exist and create is false. With create it makes the queue (and lists it in
// its project) first.
func (d *Driver) lock(ref storage.QueueRef, create bool) *queue {
	q, _ := d.lockNew(ref, create)
	return q
}

// lockNew is lock that also reports whether it created the queue.
func (d *Driver) lockNew(ref storage.QueueRef, create bool) (*queue, bool) {
	for {
		made := false
		d.mu.RLock()
		q := d.queues[ref]
		d.mu.RUnlock()
		if q == nil {
			if !create {
				return nil, false
			}
			d.mu.Lock()
			if q = d.queues[ref]; q == nil {
				q = newQueue(ref)
				d.queues[ref] = q
				d.index(ref)
				made = true
			}
			d.mu.Unlock()
		}
		q.mu.Lock()
		if q.dropped {
			// Deleted between the lookup and the lock: look again.
			q.mu.Unlock()
			continue
		}
		if n := q.advance(d.clock.Now()); n > 0 {
			d.events.ClaimsExpired(n)
		}
		return q, made
	}
}

// index adds a queue name to its project's sorted list; d.mu must be held.
func (d *Driver) index(ref storage.QueueRef) {
	names := d.projects[ref.Project]
	i := sort.SearchStrings(names, ref.Name)
	names = append(names, "")
	copy(names[i+1:], names[i:])
	names[i] = ref.Name
	d.projects[ref.Project] = names
}

// drop removes a queue from the driver.
func (d *Driver) drop(ref storage.QueueRef) {
	d.mu.Lock()
	q := d.queues[ref]
	if q != nil {
		delete(d.queues, ref)
		names := d.projects[ref.Project]
		if i := sort.SearchStrings(names, ref.Name); i < len(names) && names[i] == ref.Name {
			names = append(names[:i], names[i+1:]...)
		}
		if len(names) == 0 {
			delete(d.projects, ref.Project)
		} else {
			d.projects[ref.Project] = names
		}
	}
	d.mu.Unlock()
	if q != nil {
		q.mu.Lock()
		q.dropped = true
		q.reset()
		q.mu.Unlock()
	}
}

// Depth totals live messages over every queue.
func (d *Driver) Depth(context.Context) (storage.Depth, error) {
	d.mu.RLock()
	refs := make([]storage.QueueRef, 0, len(d.queues))
	for ref := range d.queues {
		refs = append(refs, ref)
	}
	d.mu.RUnlock()
	var depth storage.Depth
	for _, ref := range refs {
		if q := d.lock(ref, false); q != nil {
			depth.Claimed += int64(q.claimed)
			depth.Free += int64(len(q.msgs) - q.claimed)
			q.mu.Unlock()
		}
	}
	return depth, nil
}

// Leftovers names the queues the project still has.
func (d *Driver) Leftovers(_ context.Context, project string) ([]string, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []string
	for ref := range d.queues {
		if ref.Project == project {
			out = append(out, "queue "+ref.Name)
		}
	}
	for _, name := range d.projects[project] {
		out = append(out, "index entry "+name)
	}
	d.mvMu.Lock()
	for ref := range d.moves {
		if ref.Project == project {
			out = append(out, "migration record "+ref.Name)
		}
	}
	d.mvMu.Unlock()
	d.notif.mu.Lock()
	for ref, subs := range d.notif.subs {
		if ref.Project == project {
			for id := range subs {
				out = append(out, "subscription "+ref.Name+"/"+id)
			}
		}
	}
	for ref, ds := range d.notif.dlv {
		if ref.Project == project {
			for id := range ds {
				out = append(out, "delivery "+ref.Name+"/"+id)
			}
		}
	}
	for ref := range d.notif.count {
		if ref.Project == project {
			out = append(out, "delivery counters "+ref.Name)
		}
	}
	d.notif.mu.Unlock()
	sort.Strings(out)
	return out, nil
}

// names returns the project's queue names after marker containing filter.
func (d *Driver) names(project, marker, filter string, limit int) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	all := d.projects[project]
	i := sort.Search(len(all), func(i int) bool { return all[i] > marker })
	var out []string
	for ; i < len(all) && len(out) < limit; i++ {
		if filter == "" || strings.Contains(all[i], filter) {
			out = append(out, all[i])
		}
	}
	return out
}
