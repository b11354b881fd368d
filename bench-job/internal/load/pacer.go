package load

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// pace hands out start instants at a constant rate: arrival i is due at
// start + i/rate, for round(rate x duration) arrivals. A ticket is only
// accepted by a worker that is idle at that instant; if none is, the
// arrival is counted as dropped rather than delayed, so the offered load
// stays constant and slowness shows up as drops and latency (k6's
// dropped_iterations, vegeta's pacer).
func pace(ctx context.Context, rate float64, start, until time.Time, tickets chan<- time.Time, dropped *atomic.Int64) {
	defer close(tickets)
	total := int64(math.Round(rate * until.Sub(start).Seconds()))
	due := func(i int64) time.Time { return start.Add(time.Duration(float64(i) * float64(time.Second) / rate)) }
	for i := int64(0); i < total; {
		next := due(i)
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		now := time.Now()
		for ; i < total && !due(i).After(now); i++ {
			select {
			case tickets <- due(i):
			default:
				dropped.Add(1)
			}
		}
	}
}
