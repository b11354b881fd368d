package encrypt

import (
	"context"
	"slices"
	"time"

	"sluice.dev/server/internal/storage"
)

// Wrap returns d with the bodies of posts that ask for it (NewMessage.Encrypt)
// sealed by r, and every envelope read back opened: a body no key of r
// opens reads as nil with Message.Unreadable (Delivery.Unreadable) set,
// for that message only. r may be nil (the server has no key): a post
// asking for encryption is then refused (Conflict, storage.ErrNoKey), and
// every envelope reads as unreadable. Bodies that are no envelope pass as
// they are. The result implements storage.DepthReporter, storage.Inspector
// and storage.Migrator exactly when d does (passed through: moves carry
// envelopes as they are), and its message store is a storage.Remover
// exactly when d's is.
func Wrap(d storage.Driver, r *Keyring) storage.Driver { return wrap(d, r, false) }

// wrap is Wrap; all seals every post, whatever it asks (the conformance
// suite's posts know nothing of encryption).
func wrap(d storage.Driver, r *Keyring, all bool) storage.Driver {
	w := &Driver{Driver: d, d: d}
	w.q = queues{d.Queues(), r}
	m := messages{d.Messages(), r, all}
	w.m = m
	if rm, ok := d.Messages().(storage.Remover); ok {
		w.m = remover{m, rm}
	}
	w.c = claims{d.Claims(), r}
	w.v = deliveries{d.Deliveries(), r}
	return withOptional(w, d)
}

// Driver is the wrapped driver (see Wrap).
type Driver struct {
	storage.Driver // subscriptions, ping and close pass through
	d              storage.Driver
	q              storage.QueueStore
	m              storage.MessageStore
	c              storage.ClaimStore
	v              storage.DeliveryStore
}

// Unwrap returns the wrapped driver.
func (w *Driver) Unwrap() storage.Driver { return w.d }

// Queues returns the queue store whose stats open their messages.
func (w *Driver) Queues() storage.QueueStore { return w.q }

// Messages returns the message store that seals and opens bodies.
func (w *Driver) Messages() storage.MessageStore { return w.m }

// Claims returns the claim store whose claims open their messages.
func (w *Driver) Claims() storage.ClaimStore { return w.c }

// Deliveries returns the delivery store whose leases open their bodies.
func (w *Driver) Deliveries() storage.DeliveryStore { return w.v }

type (
	depth     = storage.DepthReporter
	inspector = storage.Inspector
	migrator  = storage.Migrator
)

// withOptional returns w embedded with exactly the optional interfaces d
// implements.
func withOptional(w *Driver, d storage.Driver) storage.Driver {
	dr, hasDepth := d.(storage.DepthReporter)
	in, hasInsp := d.(storage.Inspector)
	mg, hasMig := d.(storage.Migrator)
	switch {
	case hasDepth && hasInsp && hasMig:
		return struct {
			*Driver
			depth
			inspector
			migrator
		}{w, dr, in, mg}
	case hasDepth && hasInsp:
		return struct {
			*Driver
			depth
			inspector
		}{w, dr, in}
	case hasDepth && hasMig:
		return struct {
			*Driver
			depth
			migrator
		}{w, dr, mg}
	case hasInsp && hasMig:
		return struct {
			*Driver
			inspector
			migrator
		}{w, in, mg}
	case hasDepth:
		return struct {
			*Driver
			depth
		}{w, dr}
	case hasInsp:
		return struct {
			*Driver
			inspector
		}{w, in}
	case hasMig:
		return struct {
			*Driver
			migrator
		}{w, mg}
	}
	return w
}

type messages struct {
	storage.MessageStore // deletes pass through
	r                    *Keyring
	all                  bool
}

var errNoKey = storage.E(storage.OpMessagePost, storage.Conflict, storage.ErrNoKey)

// Post seals the bodies of messages that ask for it, on a copy of msgs.
func (x messages) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	sealed := msgs
	for i := range msgs {
		if !msgs[i].Encrypt && !x.all {
			continue
		}
		if x.r == nil {
			return nil, errNoKey
		}
		if &sealed[0] == &msgs[0] {
			sealed = slices.Clone(msgs)
		}
		sealed[i].Body = x.r.Seal(q.Project, msgs[i].Body)
		sealed[i].Encrypt = false
	}
	return x.MessageStore.Post(ctx, q, clientID, sealed)
}

func (x messages) List(ctx context.Context, q storage.QueueRef, opts storage.ListMessagesOptions) ([]storage.Message, string, error) {
	l, next, err := x.MessageStore.List(ctx, q, opts)
	x.r.openAll(q.Project, l)
	return l, next, err
}

func (x messages) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Message, error) {
	m, err := x.MessageStore.Get(ctx, q, id)
	x.r.open(q.Project, &m)
	return m, err
}

func (x messages) GetMany(ctx context.Context, q storage.QueueRef, ids []string) ([]storage.Message, error) {
	l, err := x.MessageStore.GetMany(ctx, q, ids)
	x.r.openAll(q.Project, l)
	return l, err
}

func (x messages) Pop(ctx context.Context, q storage.QueueRef, limit int) ([]storage.Message, error) {
	l, err := x.MessageStore.Pop(ctx, q, limit)
	x.r.openAll(q.Project, l)
	return l, err
}

// remover is the message store of a driver whose deletes say whether they
// removed the message.
type remover struct {
	messages
	rm storage.Remover
}

func (x remover) Remove(ctx context.Context, q storage.QueueRef, id, claimID string) (bool, error) {
	return x.rm.Remove(ctx, q, id, claimID)
}

type claims struct {
	storage.ClaimStore // renewals and releases pass through
	r                  *Keyring
}

func (x claims) Create(ctx context.Context, q storage.QueueRef, opts storage.ClaimOptions) (storage.Claim, error) {
	c, err := x.ClaimStore.Create(ctx, q, opts)
	x.r.openAll(q.Project, c.Messages)
	return c, err
}

func (x claims) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Claim, error) {
	c, err := x.ClaimStore.Get(ctx, q, id)
	x.r.openAll(q.Project, c.Messages)
	return c, err
}

type queues struct {
	storage.QueueStore
	r *Keyring
}

// Stats opens the oldest and newest messages it shows.
func (x queues) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	st, err := x.QueueStore.Stats(ctx, q)
	if st.Oldest != nil {
		x.r.open(q.Project, st.Oldest)
	}
	if st.Newest != nil {
		x.r.open(q.Project, st.Newest)
	}
	return st, err
}

type deliveries struct {
	storage.DeliveryStore
	r *Keyring
}

// Lease opens the bodies it hands out: notifications carry plaintext.
func (x deliveries) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	ds, next, err := x.DeliveryStore.Lease(ctx, limit, hold)
	for i := range ds {
		d := &ds[i]
		if IsEnvelope(d.Body) {
			body, err := x.r.Open(d.Queue.Project, d.Body)
			d.Body, d.Unreadable = body, err != nil
		}
	}
	return ds, next, err
}

// openAll opens every message of l in place.
func (r *Keyring) openAll(project string, l []storage.Message) {
	for i := range l {
		r.open(project, &l[i])
	}
}
