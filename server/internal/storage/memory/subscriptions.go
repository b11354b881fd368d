package memory

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// notifier holds every subscription and pending delivery of the driver
// under one lock. It lives beside the queues, not in them: a subscription
// neither needs nor creates its queue. Lock order: a queue's mu, then
// notifier.mu (Post records deliveries while holding its queue).
type notifier struct {
	// queues counts queues with subscriptions, so that posting to a
	// driver without any never takes mu (queues otherwise never contend).
	queues atomic.Int64
	mu     sync.Mutex
	subs   map[storage.QueueRef]map[string]*storage.Subscription
	dlv    map[storage.QueueRef]map[string]*delivery // by delivery id
	due    indexHeap[*delivery]                      // by next attempt
	count  map[storage.QueueRef]*counters
}

// delivery is one pending delivery and its scheduling state.
type delivery struct {
	storage.Delivery
	next time.Time // due at; while leased, the lease's end
	pos  int
}

// counters are a queue's running delivery totals, per subscription and
// overall (the overall ones outlive deleted subscriptions).
type counters struct {
	all   storage.SubscriptionDeliveries
	bySub map[string]*storage.SubscriptionDeliveries
	moved string // token of the move whose counts were added here
}

func newNotifier() *notifier {
	return &notifier{
		subs:  map[storage.QueueRef]map[string]*storage.Subscription{},
		dlv:   map[storage.QueueRef]map[string]*delivery{},
		count: map[storage.QueueRef]*counters{},
		due: indexHeap[*delivery]{
			less: func(a, b *delivery) bool { return a.next.Before(b.next) },
			pos:  func(d *delivery) *int { return &d.pos },
		},
	}
}

// live returns the queue's unexpired subscription id, dropping it when it
// has lapsed; n.mu must be held.
func (n *notifier) live(ref storage.QueueRef, id string, now time.Time) *storage.Subscription {
	s := n.subs[ref][id]
	if s == nil {
		return nil
	}
	if !s.Expires.After(now) {
		n.dropSub(ref, id)
		return nil
	}
	return s
}

// dropSub removes a subscription, its pending deliveries and counters.
func (n *notifier) dropSub(ref storage.QueueRef, id string) {
	if subs := n.subs[ref]; subs != nil {
		delete(subs, id)
		if len(subs) == 0 {
			delete(n.subs, ref)
			n.queues.Add(-1)
		}
	}
	for key, d := range n.dlv[ref] {
		if d.SubscriptionID == id {
			n.forget(ref, key, d)
		}
	}
	if c := n.count[ref]; c != nil {
		delete(c.bySub, id)
	}
}

// forget removes one pending delivery.
func (n *notifier) forget(ref storage.QueueRef, key string, d *delivery) {
	n.due.remove(d)
	delete(n.dlv[ref], key)
	if len(n.dlv[ref]) == 0 {
		delete(n.dlv, ref)
	}
}

// purge removes everything of one queue (queue deletion).
func (n *notifier) purge(ref storage.QueueRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.subs[ref] {
		n.dropSub(ref, id)
	}
	for key, d := range n.dlv[ref] {
		n.forget(ref, key, d)
	}
	delete(n.count, ref)
}

// record adds a delivery of every posted message to every deliverable live
// subscription of the queue. The caller holds the queue's lock, so the
// deliveries appear together with the messages.
func (n *notifier) record(ref storage.QueueRef, msgs []*message, now time.Time) {
	if n.queues.Load() == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	subs := n.subs[ref]
	if len(subs) == 0 {
		return
	}
	for id := range subs {
		s := n.live(ref, id, now)
		if s == nil || !s.Deliverable() {
			continue
		}
		for _, m := range msgs {
			d := &delivery{Delivery: storage.Delivery{
				Queue: ref, MessageID: m.id, SubscriptionID: s.ID, Body: m.body,
				TTL: m.expires.Sub(m.created), Posted: now, Expires: m.expires,
			}, next: now, pos: -1}
			if n.dlv[ref] == nil {
				n.dlv[ref] = map[string]*delivery{}
			}
			n.dlv[ref][d.ID()] = d
			n.due.push(d)
		}
	}
}

type subscriptionStore struct{ d *Driver }

func (s subscriptionStore) Create(_ context.Context, ref storage.QueueRef, sub storage.Subscription) (string, bool, error) {
	if sub.TTL <= 0 {
		return "", false, storage.E(storage.OpSubscriptionCreate, storage.Invalid, "subscription ttl must be positive")
	}
	id, err := storage.CreatedSubscriptionID(sub)
	if err != nil {
		return "", false, err
	}
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.subs[ref] {
		if old := n.live(ref, id, now); old != nil && old.Subscriber == sub.Subscriber {
			return old.ID, false, nil
		}
	}
	expires, err := storage.CreatedExpiry(sub, now)
	if err != nil {
		return "", false, err
	}
	sub.ID = id
	sub.Expires = expires
	sub.Options = sub.Options.Clone()
	if n.subs[ref] == nil {
		n.subs[ref] = map[string]*storage.Subscription{}
		n.queues.Add(1)
	}
	n.subs[ref][sub.ID] = &sub
	return sub.ID, true, nil
}

func (s subscriptionStore) Get(_ context.Context, ref storage.QueueRef, id string) (storage.Subscription, error) {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.live(ref, id, s.d.clock.Now())
	if sub == nil {
		return storage.Subscription{}, storage.E(storage.OpSubscriptionGet, storage.NotFound, "no such subscription")
	}
	out := *sub
	out.Options = sub.Options.Clone()
	return out, nil
}

func (s subscriptionStore) List(_ context.Context, ref storage.QueueRef, opts storage.ListSubscriptionsOptions) ([]storage.Subscription, string, error) {
	if opts.Limit <= 0 {
		return nil, "", storage.E(storage.OpSubscriptionList, storage.Invalid, "limit must be positive")
	}
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	var ids []string
	for id := range n.subs[ref] {
		if id > opts.Marker && n.live(ref, id, now) != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	next := ""
	if len(ids) > opts.Limit {
		ids = ids[:opts.Limit]
		next = ids[len(ids)-1]
	}
	out := make([]storage.Subscription, len(ids))
	for i, id := range ids {
		out[i] = *n.subs[ref][id]
		out[i].Options = out[i].Options.Clone()
	}
	return out, next, nil
}

func (s subscriptionStore) Update(_ context.Context, ref storage.QueueRef, id string, u storage.SubscriptionUpdate) error {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.live(ref, id, now)
	if sub == nil {
		return storage.E(storage.OpSubscriptionUpdate, storage.NotFound, "no such subscription")
	}
	if u.Subscriber != nil && *u.Subscriber != sub.Subscriber {
		for other := range n.subs[ref] {
			if o := n.live(ref, other, now); o != nil && o.Subscriber == *u.Subscriber {
				return storage.E(storage.OpSubscriptionUpdate, storage.Conflict, "the queue already has this subscriber")
			}
		}
		sub.Subscriber = *u.Subscriber
	}
	if u.TTL != nil {
		if *u.TTL <= 0 {
			return storage.E(storage.OpSubscriptionUpdate, storage.Invalid, "subscription ttl must be positive")
		}
		sub.TTL, sub.Expires = *u.TTL, now.Add(*u.TTL)
	}
	if u.Options != nil {
		sub.Options = u.Options.Clone()
	}
	return nil
}

func (s subscriptionStore) Confirm(_ context.Context, ref storage.QueueRef, id string, confirmed bool) error {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.live(ref, id, s.d.clock.Now())
	if sub == nil {
		return storage.E(storage.OpSubscriptionConfirm, storage.NotFound, "no such subscription")
	}
	sub.Confirmed = confirmed
	return nil
}

func (s subscriptionStore) Delete(_ context.Context, ref storage.QueueRef, id string) error {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropSub(ref, id)
	return nil
}

func (s subscriptionStore) Purge(_ context.Context, ref storage.QueueRef) error {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.subs[ref] {
		n.dropSub(ref, id)
	}
	return nil
}
