package memory

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// Heap slots a message can sit in.
const (
	slotReady   = iota // free and visible, ordered by seq: what claims and pops take
	slotDelayed        // not yet visible, ordered by delayUntil
	slotExpiry         // every message, ordered by expiry
	nSlots
)

type message struct {
	id         string
	seq        uint64
	body       json.RawMessage
	clientID   string
	created    time.Time
	expires    time.Time
	delayUntil time.Time // zero when posted without delay
	claim      *claim    // the live claim holding it; nil when free
	claimCount int
	gone       bool // deleted, popped or expired; still referenced by order until trimmed
	pos        [nSlots]int
}

type claim struct {
	id      string
	ttl     time.Duration
	grace   time.Duration
	created time.Time
	expires time.Time
	msgs    []*message // may include messages deleted since; check gone and claim
	pos     int
}

// queue is one queue's state, guarded by mu. Every operation first calls
// advance(now), which applies everything that became due since the last one
// (claim expiry, end of delay, message expiry). After advance the state holds
// only live things, so the rest of the code needs no time checks.
type queue struct {
	mu      sync.Mutex
	ref     storage.QueueRef
	dropped bool // deleted from the driver; a holder must look the queue up again
	meta    storage.Metadata

	seq     uint64
	msgs    map[string]*message
	order   []*message // by seq; gone entries are trimmed from both ends and compacted
	holes   int        // gone entries inside order
	claimed int        // messages held by live claims

	ready   indexHeap[*message]
	delayed indexHeap[*message]
	expiry  indexHeap[*message]
	claims  map[string]*claim
	byExp   indexHeap[*claim]
}

func newQueue(ref storage.QueueRef) *queue {
	q := &queue{ref: ref, meta: storage.Metadata{}}
	q.ready = indexHeap[*message]{
		less: func(a, b *message) bool { return a.seq < b.seq },
		pos:  func(m *message) *int { return &m.pos[slotReady] },
	}
	q.delayed = indexHeap[*message]{
		less: func(a, b *message) bool { return a.delayUntil.Before(b.delayUntil) },
		pos:  func(m *message) *int { return &m.pos[slotDelayed] },
	}
	q.expiry = indexHeap[*message]{
		less: func(a, b *message) bool { return a.expires.Before(b.expires) },
		pos:  func(m *message) *int { return &m.pos[slotExpiry] },
	}
	q.byExp = indexHeap[*claim]{
		less: func(a, b *claim) bool { return a.expires.Before(b.expires) },
		pos:  func(c *claim) *int { return &c.pos },
	}
	q.reset()
	return q
}

// reset drops every message and claim.
func (q *queue) reset() {
	q.msgs = map[string]*message{}
	q.claims = map[string]*claim{}
	q.order, q.holes, q.claimed = nil, 0, 0
	q.ready.clear()
	q.delayed.clear()
	q.expiry.clear()
	q.byExp.clear()
}

// advance applies what fell due by now and returns how many claims lapsed.
func (q *queue) advance(now time.Time) (expiredClaims int) {
	for q.byExp.Len() > 0 && !q.byExp.peek().expires.After(now) {
		q.release(q.byExp.pop())
		expiredClaims++
	}
	for q.delayed.Len() > 0 && !q.delayed.peek().delayUntil.After(now) {
		m := q.delayed.pop()
		if m.claim == nil {
			q.ready.push(m)
		}
	}
	for q.expiry.Len() > 0 && !q.expiry.peek().expires.After(now) {
		q.remove(q.expiry.peek())
	}
	return expiredClaims
}

// insert stores a new message.
func (q *queue) insert(m *message, now time.Time) {
	q.seq++
	m.seq = q.seq
	m.pos = [nSlots]int{-1, -1, -1}
	q.msgs[m.id] = m
	q.order = append(q.order, m)
	q.expiry.push(m)
	if m.delayUntil.After(now) {
		q.delayed.push(m)
	} else {
		q.ready.push(m)
	}
}

// remove deletes a message from every index.
func (q *queue) remove(m *message) {
	m.gone = true
	delete(q.msgs, m.id)
	q.ready.remove(m)
	q.delayed.remove(m)
	q.expiry.remove(m)
	if m.claim != nil {
		q.claimed--
		m.claim = nil
	}
	q.holes++
	q.trim()
}

// trim drops gone messages from both ends of order and compacts it once
// most of it is holes, so order costs O(live messages) memory and stays
// binary-searchable.
func (q *queue) trim() {
	for len(q.order) > 0 && q.order[0].gone {
		q.order[0] = nil
		q.order = q.order[1:]
		q.holes--
	}
	for n := len(q.order); n > 0 && q.order[n-1].gone; n = len(q.order) {
		q.order[n-1] = nil
		q.order = q.order[:n-1]
		q.holes--
	}
	if q.holes > 32 && q.holes*2 > len(q.order) {
		live := make([]*message, 0, len(q.order)-q.holes)
		for _, m := range q.order {
			if !m.gone {
				live = append(live, m)
			}
		}
		q.order, q.holes = live, 0
	}
}

// release frees the messages of a claim that lapsed or was deleted.
func (q *queue) release(c *claim) {
	q.byExp.remove(c)
	delete(q.claims, c.id)
	for _, m := range c.msgs {
		if m.gone || m.claim != c {
			continue
		}
		m.claim = nil
		q.claimed--
		if m.pos[slotDelayed] < 0 {
			q.ready.push(m)
		}
	}
}

// raiseExpiry keeps a claimed message alive at least until until.
func (q *queue) raiseExpiry(m *message, until time.Time) {
	if until.After(m.expires) {
		m.expires = until
		q.expiry.fix(m)
	}
}

// after returns the index in order of the first message with seq > marker.
func (q *queue) after(marker uint64) int {
	return sort.Search(len(q.order), func(i int) bool { return q.order[i].seq > marker })
}

// snapshot copies a message out for a caller. The body is shared: stored
// bodies are never modified, and callers must treat them as read-only.
func (m *message) snapshot() storage.Message {
	out := storage.Message{
		ID:         m.id,
		Body:       m.body,
		TTL:        m.expires.Sub(m.created),
		Created:    m.created,
		ClientID:   m.clientID,
		DelayUntil: m.delayUntil,
		ClaimCount: m.claimCount,
	}
	if m.claim != nil {
		out.ClaimID = m.claim.id
		out.ClaimExpires = m.claim.expires
	}
	return out
}
