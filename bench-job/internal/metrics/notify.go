package metrics

import (
	"sort"
	"sync"
	"time"
)

// Notifications times the notifications scenario: when the server
// acknowledged each tagged post and when its webhook notification first
// arrived. A notification may arrive before the post's response does (the
// server sends it as soon as the message is stored), so latencies are paired
// up only at the end: ack -> arrival, and 0 when the arrival came first.
// Lost and duplicated notifications are counted by the Delivery tracker.
type Notifications struct {
	mu      sync.Mutex
	acked   map[int64]int64 // seq -> ack, unix ns
	arrived map[int64]int64 // seq -> first arrival, unix ns
}

// NewNotifications returns an empty tracker.
func NewNotifications() *Notifications {
	return &Notifications{acked: map[int64]int64{}, arrived: map[int64]int64{}}
}

// Acked records that the post of seq was acknowledged at t.
func (n *Notifications) Acked(seq int64, t time.Time) {
	n.mu.Lock()
	n.acked[seq] = t.UnixNano()
	n.mu.Unlock()
}

// Arrived records a notification of seq received at t; only the first counts.
func (n *Notifications) Arrived(seq int64, t time.Time) {
	n.mu.Lock()
	if _, ok := n.arrived[seq]; !ok {
		n.arrived[seq] = t.UnixNano()
	}
	n.mu.Unlock()
}

// Outstanding counts acknowledged posts whose notification has not arrived.
func (n *Notifications) Outstanding() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var c int64
	for seq := range n.acked {
		if _, ok := n.arrived[seq]; !ok {
			c++
		}
	}
	return c
}

// Latencies files every acknowledged and notified post into op, in arrival
// order (so op's per-second series follows the arrivals), and counts under
// "before_ack" the notifications that arrived before their post's response.
func (n *Notifications) Latencies(op *Op) {
	n.mu.Lock()
	type pair struct{ ack, arr int64 }
	pairs := make([]pair, 0, len(n.acked))
	for seq, ack := range n.acked {
		if arr, ok := n.arrived[seq]; ok {
			pairs = append(pairs, pair{ack, arr})
		}
	}
	n.mu.Unlock()
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].arr < pairs[j].arr })
	var early int64
	for _, p := range pairs {
		if p.arr < p.ack {
			early++
		}
		op.Success(time.Unix(0, p.arr), time.Duration(max(p.arr-p.ack, 0)))
	}
	op.Count("before_ack", early)
}
