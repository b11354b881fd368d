package memory

import (
	"context"
	"sort"
	"time"

	"sluice.dev/server/internal/storage"
)

// Deliveries passes a copy of the queue's pending deliveries, taken under
// the notifier's lock, in delivery id order.
func (s migrationStore) Deliveries(_ context.Context, ref storage.QueueRef, limit int, f func([]storage.MovedDelivery) error) error {
	n := s.d.notif
	n.mu.Lock()
	out := make([]storage.MovedDelivery, 0, len(n.dlv[ref]))
	for _, d := range n.dlv[ref] {
		md := storage.MovedDelivery{Delivery: d.Delivery, Due: d.next}
		md.Lease = ""
		out = append(out, md)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return storage.PassDeliveries(out, limit, f)
}

// ImportDeliveries records each delivery that is new here and whose
// subscription is live, due as it was.
func (s migrationStore) ImportDeliveries(_ context.Context, ref storage.QueueRef, ds []storage.MovedDelivery) error {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, md := range storage.ImportableDeliveries(ds, now) {
		dl := md.Delivery
		dl.Queue, dl.Lease = ref, ""
		if n.dlv[ref][dl.ID()] != nil || n.live(ref, dl.SubscriptionID, now) == nil {
			continue
		}
		if n.dlv[ref] == nil {
			n.dlv[ref] = map[string]*delivery{}
		}
		d := &delivery{Delivery: dl, next: md.Due, pos: -1}
		n.dlv[ref][dl.ID()] = d
		n.due.push(d)
	}
	return nil
}

// ImportDeliveryCounts adds st to the queue's counters once per token.
func (s migrationStore) ImportDeliveryCounts(_ context.Context, ref storage.QueueRef, st storage.DeliveryStats, token string) error {
	n, now := s.d.notif, s.d.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.counters(ref)
	if c.moved == token {
		return nil
	}
	c.moved = token
	addCounts(&c.all, st.Delivered, st.Failed, st.LastError, st.LastErrorAt)
	for _, row := range st.Subscriptions {
		if n.live(ref, row.ID, now) == nil {
			continue
		}
		_, sub := n.counter(ref, row.ID)
		addCounts(sub, row.Delivered, row.Failed, row.LastError, row.LastErrorAt)
	}
	return nil
}

func addCounts(c *storage.SubscriptionDeliveries, delivered, failed int64, lastErr string, at time.Time) {
	c.Delivered += delivered
	c.Failed += failed
	if at.After(c.LastErrorAt) {
		c.LastError, c.LastErrorAt = lastErr, at
	}
}
