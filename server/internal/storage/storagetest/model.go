package storagetest

import (
	"sort"
	"time"

	"sluice.dev/server/internal/storage"
)

// model is the reference semantics of one project's queues in plain Go,
// with no storage behind it: what every driver must answer. It adopts the
// ids the driver under test hands out (messages, claims), so answers can be
// compared field by field. Time is the simulated clock's; nothing happens
// between operations, and liveness is computed from it on every read.
type model struct {
	now    time.Time
	queues map[string]*modelQueue
}

type modelQueue struct {
	exists bool
	meta   storage.Metadata
	msgs   []*modelMsg // posting order
	claims map[string]*modelClaim
}

type modelMsg struct {
	id         string
	body       string
	client     string
	created    time.Time
	expires    time.Time
	delayUntil time.Time
	claim      string // id of the last claim that took it ("" never/released)
	claimCount int
}

type modelClaim struct {
	id      string
	ttl     time.Duration
	created time.Time
	expires time.Time
}

func newModel(now time.Time) *model {
	return &model{now: now, queues: map[string]*modelQueue{}}
}

func (m *model) queue(name string) *modelQueue {
	q := m.queues[name]
	if q == nil {
		q = &modelQueue{meta: storage.Metadata{}, claims: map[string]*modelClaim{}}
		m.queues[name] = q
	}
	return q
}

func (m *model) advance(d time.Duration) { m.now = m.now.Add(d) }

// live drops expired messages and lapsed claims: an expiry is due when its
// time is not after now.
func (m *model) live(q *modelQueue) {
	kept := q.msgs[:0]
	for _, msg := range q.msgs {
		if msg.expires.After(m.now) {
			kept = append(kept, msg)
		}
	}
	clear(q.msgs[len(kept):])
	q.msgs = kept
	for id, c := range q.claims {
		if !c.expires.After(m.now) {
			delete(q.claims, id)
		}
	}
}

// holder is the live claim holding msg, or "".
func (q *modelQueue) holder(msg *modelMsg) string {
	if msg.claim != "" && q.claims[msg.claim] != nil {
		return msg.claim
	}
	return ""
}

func (m *model) visible(msg *modelMsg) bool { return !msg.delayUntil.After(m.now) }

// snapshot is the message as a driver reports it.
func (m *model) snapshot(q *modelQueue, msg *modelMsg) storage.Message {
	out := storage.Message{
		ID: msg.id, Body: []byte(msg.body), ClientID: msg.client, Created: msg.created,
		TTL: msg.expires.Sub(msg.created), ClaimCount: msg.claimCount,
	}
	if id := q.holder(msg); id != "" {
		out.ClaimID, out.ClaimExpires = id, q.claims[id].expires
	}
	return out
}

func (m *model) post(name, client string, ids []string, msgs []storage.NewMessage) {
	q := m.queue(name)
	m.live(q)
	q.exists = true
	for i, nm := range msgs {
		msg := &modelMsg{id: ids[i], body: string(nm.Body), client: client, created: m.now, expires: m.now.Add(nm.TTL)}
		if nm.Delay > 0 {
			msg.delayUntil = m.now.Add(nm.Delay)
		}
		q.msgs = append(q.msgs, msg)
	}
}

// claim takes up to limit of the oldest free, visible messages; those past
// an active dead-letter policy's count move to its queue afterwards, fresh.
// id is the claim id the driver answered ("" when it claimed nothing).
func (m *model) claim(name string, o storage.ClaimOptions, id string) storage.Claim {
	q := m.queue(name)
	m.live(q)
	c := &modelClaim{id: id, ttl: o.TTL, created: m.now, expires: m.now.Add(o.TTL)}
	var taken []*modelMsg
	var moved []*modelMsg
	for _, msg := range q.msgs {
		if len(taken) == o.Limit {
			break
		}
		if q.holder(msg) != "" || !m.visible(msg) {
			continue
		}
		if o.DeadLetter.Active() && msg.claimCount >= o.DeadLetter.MaxClaimCount {
			moved = append(moved, msg)
			continue
		}
		taken = append(taken, msg)
	}
	for _, msg := range moved {
		m.remove(q, msg.id)
	}
	out := storage.Claim{}
	if len(taken) > 0 {
		q.claims[id] = c
		out = storage.Claim{ID: id, TTL: o.TTL, Created: m.now}
		for _, msg := range taken {
			msg.claim = id
			msg.claimCount++
			if until := c.expires.Add(o.Grace); until.After(msg.expires) {
				msg.expires = until
			}
			out.Messages = append(out.Messages, m.snapshot(q, msg))
		}
	}
	if len(moved) > 0 {
		dl := o.DeadLetter
		dq := m.queue(dl.Queue)
		m.live(dq)
		dq.exists = true
		for _, old := range moved {
			ttl := dl.TTL
			if ttl <= 0 {
				ttl = old.expires.Sub(old.created)
			}
			dq.msgs = append(dq.msgs, &modelMsg{id: old.id, body: old.body, client: old.client, created: m.now, expires: m.now.Add(ttl)})
		}
	}
	return out
}

func (m *model) remove(q *modelQueue, id string) {
	for i, msg := range q.msgs {
		if msg.id == id {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			return
		}
	}
}

func (m *model) find(q *modelQueue, id string) *modelMsg {
	for _, msg := range q.msgs {
		if msg.id == id {
			return msg
		}
	}
	return nil
}

// claimGet returns a live claim with the messages it holds, or NotFound.
func (m *model) claimGet(name, id string) (storage.Claim, *storage.Kind) {
	q := m.queue(name)
	m.live(q)
	c := q.claims[id]
	if c == nil {
		return storage.Claim{}, kind(storage.NotFound)
	}
	out := storage.Claim{ID: id, TTL: c.ttl, Created: c.created}
	for _, msg := range q.msgs {
		if q.holder(msg) == id {
			out.Messages = append(out.Messages, m.snapshot(q, msg))
		}
	}
	return out, nil
}

// claimUpdate renews a live claim from now and keeps its messages alive
// past the new expiry plus grace.
func (m *model) claimUpdate(name, id string, ttl, grace time.Duration) *storage.Kind {
	q := m.queue(name)
	m.live(q)
	c := q.claims[id]
	if c == nil {
		return kind(storage.NotFound)
	}
	c.ttl, c.expires = ttl, m.now.Add(ttl)
	for _, msg := range q.msgs {
		if q.holder(msg) == id {
			if until := c.expires.Add(grace); until.After(msg.expires) {
				msg.expires = until
			}
		}
	}
	return nil
}

func (m *model) claimRelease(name, id string) {
	q := m.queue(name)
	m.live(q)
	delete(q.claims, id)
}

// deleteMessage: a message held by a live claim needs that claim's id
// (none or another live claim's: Forbidden, one that does not exist:
// Invalid); so does a free one with a claim id given (Invalid). An absent
// message is deleted already.
func (m *model) deleteMessage(name, id, claimID string) *storage.Kind {
	q := m.queue(name)
	m.live(q)
	msg := m.find(q, id)
	if msg == nil {
		return nil
	}
	if holder := q.holder(msg); holder != claimID {
		if claimID == "" || holder != "" && q.claims[claimID] != nil {
			return kind(storage.Forbidden)
		}
		return kind(storage.Invalid)
	}
	m.remove(q, id)
	return nil
}

// deleteMany removes the given messages that are free or held by claimID.
func (m *model) deleteMany(name string, ids []string, claimID string) {
	q := m.queue(name)
	m.live(q)
	for _, id := range ids {
		if msg := m.find(q, id); msg != nil {
			if h := q.holder(msg); h == "" || h == claimID {
				m.remove(q, id)
			}
		}
	}
}

func (m *model) pop(name string, limit int) []storage.Message {
	q := m.queue(name)
	m.live(q)
	var out []storage.Message
	var gone []string
	for _, msg := range q.msgs {
		if len(out) == limit {
			break
		}
		if q.holder(msg) == "" && m.visible(msg) {
			out = append(out, m.snapshot(q, msg))
			gone = append(gone, msg.id)
		}
	}
	for _, id := range gone {
		m.remove(q, id)
	}
	return out
}

func (m *model) get(name, id string) (storage.Message, *storage.Kind) {
	q := m.queue(name)
	m.live(q)
	if msg := m.find(q, id); msg != nil {
		return m.snapshot(q, msg), nil
	}
	return storage.Message{}, kind(storage.NotFound)
}

// list is every message a walk over all pages returns.
func (m *model) list(name string, o storage.ListMessagesOptions) []storage.Message {
	q := m.queue(name)
	m.live(q)
	var out []storage.Message
	for _, msg := range q.msgs {
		switch {
		case !o.Echo && msg.client == o.ClientID,
			!o.IncludeClaimed && q.holder(msg) != "",
			!o.IncludeDelayed && !m.visible(msg):
			continue
		}
		out = append(out, m.snapshot(q, msg))
	}
	return out
}

func (m *model) stats(name string) (total, claimed int) {
	q := m.queue(name)
	m.live(q)
	for _, msg := range q.msgs {
		if q.holder(msg) != "" {
			claimed++
		}
	}
	return len(q.msgs), claimed
}

func (m *model) create(name string, meta storage.Metadata) bool {
	q := m.queue(name)
	if q.exists {
		return false
	}
	q.exists, q.meta = true, meta.Clone()
	return true
}

func (m *model) updateMetadata(name string, update func(storage.Metadata) storage.Metadata) (storage.Metadata, *storage.Kind) {
	q := m.queue(name)
	if !q.exists {
		return nil, kind(storage.NotFound)
	}
	q.meta = update(q.meta.Clone())
	return q.meta.Clone(), nil
}

func (m *model) metadata(name string) storage.Metadata { return m.queue(name).meta.Clone() }

func (m *model) purge(name string) {
	q := m.queue(name)
	q.msgs, q.claims = nil, map[string]*modelClaim{}
}

func (m *model) deleteQueue(name string) {
	delete(m.queues, name)
}

// names lists the queues that exist, sorted.
func (m *model) names() []string {
	var out []string
	for n, q := range m.queues {
		if q.exists {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
