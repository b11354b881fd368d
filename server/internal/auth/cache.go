package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Validator answers for one token; *Client is the real one.
type Validator interface {
	Validate(ctx context.Context, token string) (Identity, error)
}

// Cached validates tokens through a Validator and remembers the answers:
//   - a valid token is reused without asking Keystone until it expires, or
//     until it was last checked longer than revalidate ago; then it is
//     checked again, so a revocation takes effect within revalidate;
//   - if Keystone cannot be reached at that re-check, the cached answer is
//     kept until the token's own expiry (the token was valid and nothing
//     says otherwise), while tokens never seen get 503;
//   - an invalid token is remembered as invalid for revalidate, so a client
//     retrying a bad token does not turn into load on Keystone.
//
// At most size tokens are remembered; past that, inserting evicts one
// (an expired one when the sample holds one, otherwise any).
type Cached struct {
	v          Validator
	size       int
	revalidate time.Duration
	refusals   time.Duration // how long a refusal is remembered
	now        func() time.Time

	mu      sync.RWMutex
	entries map[string]*entry
	flight  singleflight.Group
}

type entry struct {
	id      Identity
	err     error // ErrInvalid or ErrUnscoped: a remembered refusal
	checked time.Time
}

// NewCached wraps v with a cache of at most size tokens.
func NewCached(v Validator, size int, revalidate time.Duration) *Cached {
	return &Cached{v: v, size: size, revalidate: revalidate, refusals: revalidate, now: time.Now, entries: make(map[string]*entry, min(size, 1024))}
}

// RememberRefusals makes refusals last d instead of revalidate, for a
// validator whose answers are cheap but may change soon (a key the issuer
// has just published); it returns c.
func (c *Cached) RememberRefusals(d time.Duration) *Cached {
	c.refusals = d
	return c
}

// Authenticate returns the identity of a token, from the cache when the
// cached answer is fresh enough.
func (c *Cached) Authenticate(ctx context.Context, token string) (Identity, error) {
	now := c.now()
	c.mu.RLock()
	e := c.entries[token]
	c.mu.RUnlock()
	if e != nil && e.err != nil && now.Sub(e.checked) < c.refusals {
		return Identity{}, e.err
	}
	if e != nil && e.err == nil && now.Sub(e.checked) < c.revalidate && now.Before(e.id.Expires) {
		return e.id, nil
	}
	// One Keystone call per token however many requests carry it at once.
	res, err, _ := c.flight.Do(token, func() (any, error) {
		// Detached from this request: others may be waiting on the answer,
		// and the Keystone client's own timeout bounds the call.
		id, err := c.v.Validate(context.WithoutCancel(ctx), token)
		c.record(token, id, err)
		return id, err
	})
	id := res.(Identity)
	var unavailable *UnavailableError
	if errors.As(err, &unavailable) && e != nil && e.err == nil && c.now().Before(e.id.Expires) {
		return e.id, nil
	}
	return id, err
}

// record stores Keystone's answer; an unavailable Keystone changes nothing.
func (c *Cached) record(token string, id Identity, err error) {
	var ne *entry
	switch {
	case err == nil:
		ne = &entry{id: id, checked: c.now()}
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrUnscoped):
		ne = &entry{err: err, checked: c.now()}
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[token]; !ok && len(c.entries) >= c.size {
		c.evictLocked(ne.checked)
	}
	c.entries[token] = ne
}

// evictSample is how many entries eviction looks at for an expired one.
const evictSample = 32

// evictLocked removes one entry: the first expired one among a sample
// (Go's map iteration starts at a random place), else the first seen.
func (c *Cached) evictLocked(now time.Time) {
	var victim string
	n := 0
	for k, e := range c.entries {
		if n == 0 {
			victim = k
		}
		if e.err != nil && now.Sub(e.checked) >= c.refusals || e.err == nil && !now.Before(e.id.Expires) {
			victim = k
			break
		}
		if n++; n >= evictSample {
			break
		}
	}
	delete(c.entries, victim)
}

// Len is how many tokens are remembered.
func (c *Cached) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
