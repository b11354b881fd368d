package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Delivery verifies task distribution: each produced message carries this
// process's origin id and a sequence number; consumers mark what they claim.
// Lost = acknowledged posts never claimed; duplicated = claims of a message
// already claimed once, except redelivered ones: a message whose delete
// failed stays claimed until its claim expires and is then offered again,
// as at-least-once delivery allows.
type Delivery struct {
	Origin string
	seq    atomic.Int64

	mu        sync.Mutex
	produced  Bitset             // our own acknowledged posts
	seen      map[string]*Bitset // claimed, by origin (other pods' too)
	consumed  int64              // every claimed tagged message, duplicates included
	duplicate int64
	undeleted map[string]*Bitset // claimed, then their delete failed
	redeliver int64              // claims of an undeleted message again
	e2e       *hdr.Histogram     // post start -> claim response, µs
}

// NewDelivery returns a tracker for messages tagged with origin.
func NewDelivery(origin string) *Delivery {
	return &Delivery{Origin: origin, seen: map[string]*Bitset{}, undeleted: map[string]*Bitset{}, e2e: NewHist()}
}

// Next reserves the next sequence number for an outgoing message.
func (d *Delivery) Next() int64 { return d.seq.Add(1) - 1 }

// Produced marks seq as acknowledged by the server (201).
func (d *Delivery) Produced(seq int64) {
	d.mu.Lock()
	d.produced.Set(seq)
	d.mu.Unlock()
}

// Claimed records a claimed message posted at sentNanos (unix ns).
func (d *Delivery) Claimed(origin string, seq int64, sentNanos int64, now time.Time) {
	d.mu.Lock()
	b := d.seen[origin]
	if b == nil {
		b = &Bitset{}
		d.seen[origin] = b
	}
	d.consumed++
	if b.Set(seq) {
		if u := d.undeleted[origin]; u != nil && u.Has(seq) {
			d.redeliver++
		} else {
			d.duplicate++
		}
	}
	if sentNanos > 0 {
		RecordMicros(d.e2e, (now.UnixNano()-sentNanos)/1000)
	}
	d.mu.Unlock()
}

// Undeleted records a claimed message whose delete failed: when it comes
// back after its claim expires, that is a redelivery, not a duplicate.
func (d *Delivery) Undeleted(origin string, seq int64) {
	d.mu.Lock()
	u := d.undeleted[origin]
	if u == nil {
		u = &Bitset{}
		d.undeleted[origin] = u
	}
	u.Set(seq)
	d.mu.Unlock()
}

// DeliverySnapshot is the final delivery state of one process.
type DeliverySnapshot struct {
	Origin     string
	Produced   *Bitset
	Seen       map[string]*Bitset
	Consumed   int64
	Duplicated int64
	// Redelivered: claims of messages whose delete had failed (not duplicates).
	Redelivered int64
	E2E         *hdr.Histogram
}

// Finish returns a copy of the delivery state.
func (d *Delivery) Finish() DeliverySnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := make(map[string]*Bitset, len(d.seen))
	for k, v := range d.seen {
		c := &Bitset{}
		c.Or(v)
		seen[k] = c
	}
	p := &Bitset{}
	p.Or(&d.produced)
	return DeliverySnapshot{Origin: d.Origin, Produced: p, Seen: seen, Consumed: d.consumed,
		Duplicated: d.duplicate, Redelivered: d.redeliver, E2E: hdr.Import(d.e2e.Export())}
}
