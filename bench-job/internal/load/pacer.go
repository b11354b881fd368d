package load

import (
	"context"
	"sync/atomic"
	"time"
)

// pace hands out start instants at a constant rate. A ticket is only
// accepted by a worker that is idle at that instant; if none is, the
// arrival is counted as dropped rather than delayed, so the offered load
// stays constant and slowness shows up as drops and latency (k6's
// dropped_iterations, vegeta's pacer).
func pace(ctx context.Context, rate float64, start, until time.Time, tickets chan<- time.Time, dropped *atomic.Int64) {
	defer close(tickets)
	interval := time.Duration(float64(time.Second) / rate)
	if interval <= 0 {
		interval = 1
	}
	next := start
	for next.Before(until) {
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		now := time.Now()
		for !next.After(now) && next.Before(until) {
			select {
			case tickets <- next:
			default:
				dropped.Add(1)
			}
			next = next.Add(interval)
		}
	}
}
