package storage

import "context"

// Events receives counts of things that happen inside a driver without a
// request asking for them, so the server can export them as metrics while
// drivers stay free of any metrics library. Implementations must be cheap and
// safe for concurrent use; drivers call them while serving requests.
type Events interface {
	// ClaimsExpired reports n claims found lapsed (not released). Drivers
	// notice expiry lazily, so the count is taken when a later call on the
	// same queue observes it, not at the instant of expiry.
	ClaimsExpired(n int)
	// DeadLettered reports n messages moved to a dead-letter queue, or
	// dropped because their queue has _max_claim_count but no
	// _dead_letter_queue.
	DeadLettered(n int)
}

// NopEvents discards every event; Open substitutes it for a nil Options.Events.
type NopEvents struct{}

// ClaimsExpired does nothing.
func (NopEvents) ClaimsExpired(int) {}

// DeadLettered does nothing.
func (NopEvents) DeadLettered(int) {}

// Depth is the number of live messages a driver holds over all projects and
// queues. It is deliberately not broken down by queue: queue names are
// unbounded and must never become metric labels.
type Depth struct {
	Free    int64
	Claimed int64
}

// DepthReporter is implemented by drivers that can total their messages at
// metrics scrape time. It may cost one pass over the driver's queues, so call
// it from a scrape, not per request.
type DepthReporter interface {
	Depth(ctx context.Context) (Depth, error)
}

// Inspector is implemented by drivers that can tell what they still store for
// a project. The conformance suite uses it to fail a test that leaves data
// behind after deleting every queue it made (leaked keys, documents or
// indexes). The strings are driver-specific descriptions such as key names.
type Inspector interface {
	Leftovers(ctx context.Context, project string) ([]string, error)
}
