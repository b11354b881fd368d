package memory

import (
	"context"
	"time"

	"sluice.dev/server/internal/storage"
)

type claimStore struct{ d *Driver }

func (s claimStore) Create(_ context.Context, ref storage.QueueRef, opts storage.ClaimOptions) (storage.Claim, error) {
	if err := s.d.gone(storage.OpClaimCreate, ref); err != nil {
		return storage.Claim{}, err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.Claim{}, nil
	}
	if dl := opts.DeadLetter; dl.Active() && s.d.sealedErr("", storage.QueueRef{Project: ref.Project, Name: dl.Queue}) != nil {
		// The dead-letter queue is moving away (sealed, or a tombstone): a
		// message moved into it here would be stranded, so the policy waits
		// until the queue lives on one backend again.
		opts.DeadLetter = nil
	}
	now := s.d.clock.Now()
	c := &claim{id: storage.NewID(), ttl: opts.TTL, grace: opts.Grace, created: now, expires: now.Add(opts.TTL), pos: -1}
	var dead []*message
	out := storage.Claim{ID: c.id, TTL: c.ttl, Created: now}
	for len(c.msgs) < opts.Limit && q.ready.Len() > 0 {
		m := q.ready.pop()
		if dl := opts.DeadLetter; dl.Active() && m.claimCount >= dl.MaxClaimCount {
			q.remove(m)
			dead = append(dead, m)
			continue
		}
		m.claim = c
		m.claimCount++
		q.claimed++
		q.raiseExpiry(m, c.expires.Add(c.grace))
		c.msgs = append(c.msgs, m)
		out.Messages = append(out.Messages, m.snapshot())
	}
	var err error
	if len(c.msgs) > 0 {
		q.claims[c.id] = c
		q.byExp.push(c)
	} else {
		out = storage.Claim{}
		err = s.d.busy(storage.OpClaimCreate, ref)
	}
	q.mu.Unlock()
	if len(dead) > 0 {
		s.deadLetter(ref.Project, opts.DeadLetter, dead, now)
	}
	return out, err
}

// deadLetter moves messages that exhausted their claims into the policy's
// queue. It runs after the source queue
// is unlocked: holding two queue locks at once could deadlock two queues
// that dead-letter into each other. The messages keep their ids and bodies
// and start a fresh life (new TTL, no claims) in the dead-letter queue.
func (s claimStore) deadLetter(project string, dl *storage.DeadLetter, dead []*message, now time.Time) {
	q := s.d.lock(storage.QueueRef{Project: project, Name: dl.Queue}, true)
	for _, old := range dead {
		ttl := dl.TTL
		if ttl <= 0 {
			ttl = old.expires.Sub(old.created)
		}
		q.insert(&message{
			id:       old.id,
			body:     old.body,
			clientID: old.clientID,
			created:  now,
			expires:  now.Add(ttl),
		}, now)
	}
	q.mu.Unlock()
	s.d.events.DeadLettered(len(dead))
}

func (s claimStore) Get(_ context.Context, ref storage.QueueRef, id string) (storage.Claim, error) {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	var c *claim
	if q != nil {
		c = q.claims[id]
	}
	if c == nil {
		if err := s.d.named(storage.OpClaimGet, ref, id); err != nil {
			return storage.Claim{}, err
		}
		return storage.Claim{}, storage.E(storage.OpClaimGet, storage.NotFound, storage.ErrNoClaim)
	}
	out := storage.Claim{ID: c.id, TTL: c.ttl, Created: c.created}
	for _, m := range c.msgs {
		if !m.gone && m.claim == c {
			out.Messages = append(out.Messages, m.snapshot())
		}
	}
	return out, nil
}

func (s claimStore) Update(_ context.Context, ref storage.QueueRef, id string, ttl, grace time.Duration) error {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
	}
	var c *claim
	if q != nil {
		c = q.claims[id]
	}
	if c == nil {
		if err := s.d.named(storage.OpClaimUpdate, ref, id); err != nil {
			return err
		}
		return storage.E(storage.OpClaimUpdate, storage.NotFound, storage.ErrNoClaim)
	}
	now := s.d.clock.Now()
	c.ttl, c.grace, c.expires = ttl, grace, now.Add(ttl)
	q.byExp.fix(c)
	for _, m := range c.msgs {
		if !m.gone && m.claim == c {
			q.raiseExpiry(m, c.expires.Add(grace))
		}
	}
	return nil
}

func (s claimStore) Delete(_ context.Context, ref storage.QueueRef, id string) error {
	q := s.d.lock(ref, false)
	if q != nil {
		defer q.mu.Unlock()
		if c := q.claims[id]; c != nil {
			q.release(c)
			return nil
		}
	}
	return s.d.named(storage.OpClaimDelete, ref, id)
}
