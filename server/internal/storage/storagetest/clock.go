package storagetest

import (
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// Clock is a settable storage.Clock for tests, in the manner of asynq's
// SimulatedClock. It starts at the wall-clock time (to the millisecond) so
// that backends which also keep their own wall-clock TTLs (Redis PEXPIRE)
// never expire data the simulated clock still considers alive: the simulated
// time only ever runs ahead of the real one.
//
// A Clock also counts the events a driver reports (see Options), so the
// suite can check claim expirations and dead-letter moves.
type Clock struct {
	mu sync.Mutex
	t  time.Time

	Events *Events
}

// NewClock returns a Clock set to now, truncated to milliseconds (the
// resolution drivers store).
func NewClock() *Clock {
	return &Clock{t: time.Now().Truncate(time.Millisecond), Events: &Events{}}
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Events counts what a driver reports through storage.Events.
type Events struct {
	claimsExpired atomic.Int64
	deadLettered  atomic.Int64
}

// ClaimsExpired implements storage.Events.
func (e *Events) ClaimsExpired(n int) { e.claimsExpired.Add(int64(n)) }

// DeadLettered implements storage.Events.
func (e *Events) DeadLettered(n int) { e.deadLettered.Add(int64(n)) }

// Counts returns the totals so far.
func (e *Events) Counts() (claimsExpired, deadLettered int64) {
	return e.claimsExpired.Load(), e.deadLettered.Load()
}

// Options returns the storage.Options an opener should give its driver for
// the clock Run passes it: that clock, and the clock's event counter when it
// is a *Clock.
func Options(clock storage.Clock) storage.Options {
	opts := storage.Options{Clock: clock}
	if c, ok := clock.(*Clock); ok {
		opts.Events = c.Events
	}
	return opts.WithDefaults()
}
