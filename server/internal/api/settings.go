package api

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// queueSettings is what a queue's reserved metadata changes about requests,
// resolved against the server's defaults.
type queueSettings struct {
	maxPostSize int
	ttl         time.Duration // default message TTL
	delay       time.Duration // default message delay
	// hasDelay: the queue sets _default_message_delay; only then does a
	// listing hide delayed messages by default (as Zaqar).
	hasDelay   bool
	deadLetter *storage.DeadLetter
	// encrypt: _enable_encrypt_messages, posts are stored encrypted.
	encrypt bool
}

// settingsOf resolves a queue's metadata. Values were validated when they
// were stored; anything unusable falls back to the server default.
func (s *Server) settingsOf(meta storage.Metadata) queueSettings {
	qs := queueSettings{maxPostSize: s.opts.MaxMessagesPostSize, ttl: s.opts.DefaultMessageTTL}
	if n, ok := metaInt(meta["_max_messages_post_size"]); ok && n > 0 && n < int64(qs.maxPostSize) {
		qs.maxPostSize = int(n)
	}
	if n, ok := metaInt(meta["_default_message_ttl"]); ok && n >= minMessageTTL {
		qs.ttl = time.Duration(n) * time.Second
	}
	if n, ok := metaInt(meta["_default_message_delay"]); ok && n > 0 {
		qs.delay = time.Duration(n) * time.Second
		qs.hasDelay = true
	}
	qs.encrypt, _ = meta["_enable_encrypt_messages"].(bool)
	// Zaqar dead-letters only when both _max_claim_count and
	// _dead_letter_queue are set; a claim limit alone changes nothing.
	n, ok := metaInt(meta["_max_claim_count"])
	if dlq, _ := meta["_dead_letter_queue"].(string); ok && n > 0 && dlq != "" {
		dl := &storage.DeadLetter{MaxClaimCount: int(n), Queue: dlq}
		if t, ok := metaInt(meta["_dead_letter_queue_messages_ttl"]); ok && t > 0 {
			dl.TTL = time.Duration(t) * time.Second
		}
		qs.deadLetter = dl
	}
	return qs
}

// metaInt reads an integer from decoded JSON, whichever way the driver
// decoded it.
func metaInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	}
	return 0, false
}

// queueSettings returns a queue's settings, from the cache when fresh.
func (s *Server) queueSettings(ctx context.Context, q storage.QueueRef) (queueSettings, error) {
	if qs, ok := s.cache.get(q); ok {
		return qs, nil
	}
	meta, err := s.drv.Queues().GetMetadata(ctx, q)
	if err != nil {
		return queueSettings{}, err
	}
	qs := s.settingsOf(meta)
	s.cache.put(q, qs)
	return qs, nil
}

// settingsCache spares the hot paths (post, claim) a metadata read per
// request. Changes made through this server invalidate it at once; other
// replicas notice within the TTL.
type settingsCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[storage.QueueRef]cachedSettings
}

type cachedSettings struct {
	qs      queueSettings
	expires int64 // unix nanoseconds
}

// maxCached bounds the cache; past it the cache starts over.
const maxCached = 10000

func newSettingsCache(ttl time.Duration) *settingsCache {
	return &settingsCache{ttl: ttl, m: map[storage.QueueRef]cachedSettings{}}
}

func (c *settingsCache) get(q storage.QueueRef) (queueSettings, bool) {
	if c.ttl <= 0 {
		return queueSettings{}, false
	}
	c.mu.RLock()
	e, ok := c.m[q]
	c.mu.RUnlock()
	if !ok || time.Now().UnixNano() > e.expires {
		return queueSettings{}, false
	}
	return e.qs, true
}

func (c *settingsCache) put(q storage.QueueRef, qs queueSettings) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[q] = cachedSettings{qs: qs, expires: time.Now().Add(c.ttl).UnixNano()}
	c.mu.Unlock()
}

func (c *settingsCache) forget(q storage.QueueRef) {
	c.mu.Lock()
	delete(c.m, q)
	c.mu.Unlock()
}
