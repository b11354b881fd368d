package api

import (
	"context"
	"sync"
	"time"
)

// callDeadlines hands out the contexts that bound requests' storage calls
// by the storage timeout. Requests that begin within one step share one
// context, whose deadline is the timeout after the latest of them began
// plus at most a step: so a request's calls get at least the timeout and
// at most the timeout and a step (a step is at most 10 ms; the timeout
// is seconds). A context per request cost a timer, a cancel context
// registered with the request's and a Done channel each: 3.5 % of the
// instructions of a claim or delete request (docs/benchmarks.md,
// "Instructions per request").
//
// The contexts are not the request's: a client that goes away does not
// cancel a storage call it started, which runs to its end or its deadline
// as it would have once sent to the store, so that a write is all or
// nothing whether or not anyone waits for its answer.
type callDeadlines struct {
	timeout time.Duration
	step    time.Duration

	mu     sync.Mutex
	cur    context.Context
	end    time.Time          // cur's deadline
	cancel context.CancelFunc // cur's; its deadline releases it
}

// maxDeadlineStep bounds how much longer than the timeout a request's
// storage calls may be given.
const maxDeadlineStep = 10 * time.Millisecond

func newCallDeadlines(timeout time.Duration) *callDeadlines {
	return &callDeadlines{timeout: timeout, step: min(maxDeadlineStep, timeout/100)}
}

// context is the context for a request that began at now.
func (d *callDeadlines) context(now time.Time) context.Context {
	want := now.Add(d.timeout)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil || d.end.Before(want) {
		d.end = want.Add(d.step)
		d.cur, d.cancel = context.WithDeadline(context.Background(), d.end)
	}
	return d.cur
}
