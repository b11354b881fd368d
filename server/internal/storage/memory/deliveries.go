package memory

import (
	"context"
	"sort"
	"time"

	"sluice.dev/server/internal/storage"
)

type deliveryStore struct{ d *Driver }

// counters returns the queue's counters, made when missing; n.mu held.
func (n *notifier) counters(ref storage.QueueRef) *counters {
	c := n.count[ref]
	if c == nil {
		c = &counters{bySub: map[string]*storage.SubscriptionDeliveries{}}
		n.count[ref] = c
	}
	return c
}

// counter returns the queue's counters for a subscription; n.mu held.
func (n *notifier) counter(ref storage.QueueRef, sub string) (*storage.SubscriptionDeliveries, *storage.SubscriptionDeliveries) {
	c := n.counters(ref)
	s := c.bySub[sub]
	if s == nil {
		s = &storage.SubscriptionDeliveries{ID: sub}
		c.bySub[sub] = s
	}
	return &c.all, s
}

func (s deliveryStore) Lease(_ context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	if limit <= 0 || hold <= 0 {
		return nil, time.Time{}, storage.E(storage.OpDeliveryLease, storage.Invalid, "limit and hold must be positive")
	}
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []storage.Delivery
	token := storage.NewID()
	for len(out) < limit && n.due.Len() > 0 && !n.due.peek().next.After(now) {
		d := n.due.peek()
		if !d.Expires.After(now) || n.live(d.Queue, d.SubscriptionID, now) == nil {
			n.forget(d.Queue, d.ID(), d)
			if n.subs[d.Queue][d.SubscriptionID] != nil {
				all, sub := n.counter(d.Queue, d.SubscriptionID)
				all.Failed++
				sub.Failed++
			} else {
				all, _ := n.counter(d.Queue, d.SubscriptionID)
				all.Failed++
				delete(n.count[d.Queue].bySub, d.SubscriptionID)
			}
			continue
		}
		d.Lease = token
		d.next = now.Add(hold)
		n.due.fix(d)
		out = append(out, d.Delivery)
	}
	var next time.Time
	if n.due.Len() > 0 {
		next = n.due.peek().next
	}
	return out, next, nil
}

// held returns the pending delivery d names; n.mu held.
func (n *notifier) held(d storage.Delivery) *delivery {
	return n.dlv[d.Queue][d.ID()]
}

func (s deliveryStore) Ack(_ context.Context, d storage.Delivery) error {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.held(d)
	if p == nil {
		return nil
	}
	n.forget(d.Queue, d.ID(), p)
	all, sub := n.counter(d.Queue, d.SubscriptionID)
	all.Delivered++
	sub.Delivered++
	return nil
}

func (s deliveryStore) Retry(_ context.Context, d storage.Delivery, at time.Time, errText string) error {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.held(d)
	if p == nil || p.Lease != d.Lease {
		return nil
	}
	p.Attempts++
	p.Lease = ""
	p.next = at
	n.due.fix(p)
	all, sub := n.counter(d.Queue, d.SubscriptionID)
	all.LastError, all.LastErrorAt = errText, now
	sub.LastError, sub.LastErrorAt = errText, now
	return nil
}

func (s deliveryStore) Release(_ context.Context, d storage.Delivery, at time.Time) error {
	n := s.d.notif
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.held(d)
	if p == nil || p.Lease != d.Lease {
		return nil
	}
	p.Lease = ""
	p.next = at
	n.due.fix(p)
	return nil
}

func (s deliveryStore) Fail(_ context.Context, d storage.Delivery, errText string) error {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.held(d)
	if p == nil {
		return nil
	}
	n.forget(d.Queue, d.ID(), p)
	all, sub := n.counter(d.Queue, d.SubscriptionID)
	all.Failed++
	sub.Failed++
	all.LastError, all.LastErrorAt = errText, now
	sub.LastError, sub.LastErrorAt = errText, now
	return nil
}

func (s deliveryStore) Stats(_ context.Context, ref storage.QueueRef) (storage.DeliveryStats, error) {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	var st storage.DeliveryStats
	if c := n.count[ref]; c != nil {
		st.Failed, st.Delivered, st.LastError, st.LastErrorAt = c.all.Failed, c.all.Delivered, c.all.LastError, c.all.LastErrorAt
	}
	pending := map[string]int64{}
	for _, d := range n.dlv[ref] {
		if d.Expires.After(now) {
			pending[d.SubscriptionID]++
		}
	}
	for id := range n.subs[ref] {
		sub := n.live(ref, id, now)
		if sub == nil {
			continue
		}
		row := storage.SubscriptionDeliveries{ID: id, Subscriber: sub.Subscriber, Pending: pending[id]}
		if c := n.count[ref]; c != nil && c.bySub[id] != nil {
			x := c.bySub[id]
			row.Failed, row.Delivered, row.LastError, row.LastErrorAt = x.Failed, x.Delivered, x.LastError, x.LastErrorAt
		}
		st.Pending += row.Pending
		st.Subscriptions = append(st.Subscriptions, row)
	}
	sort.Slice(st.Subscriptions, func(i, j int) bool { return st.Subscriptions[i].ID < st.Subscriptions[j].ID })
	return st, nil
}

func (s deliveryStore) Pending(context.Context) (int64, error) {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	var total int64
	for ref, ds := range n.dlv {
		for _, d := range ds {
			if d.Expires.After(now) && n.live(ref, d.SubscriptionID, now) != nil {
				total++
			}
		}
	}
	return total, nil
}
