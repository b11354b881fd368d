package storage

import "context"

// Capacity is how much a backend holds and may hold: Redis's used_memory
// against its maxmemory. MaxBytes 0 means no limit is set.
type Capacity struct {
	UsedBytes int64
	MaxBytes  int64
	// Policy is what the backend does at its limit (Redis's
	// maxmemory-policy); "" when it has none to report.
	Policy string
}

// HighWater is the share of its limit above which a backend gets no new
// queues: the queues it holds keep room to grow while consumers catch up.
const HighWater = 0.9

// Full reports whether the backend is at its limit.
func (c Capacity) Full() bool { return c.MaxBytes > 0 && c.UsedBytes >= c.MaxBytes }

// Crowded reports whether the backend is above HighWater.
func (c Capacity) Crowded() bool {
	return c.MaxBytes > 0 && float64(c.UsedBytes) >= HighWater*float64(c.MaxBytes)
}

// CapacityReporter is implemented by drivers that can say how full their
// backend is.
type CapacityReporter interface {
	Capacity(ctx context.Context) (Capacity, error)
}

// CapacityOf finds the CapacityReporter in d or in the drivers it wraps
// (through Unwrap), or returns nil.
func CapacityOf(d Driver) CapacityReporter {
	for d != nil {
		if c, ok := d.(CapacityReporter); ok {
			return c
		}
		u, ok := d.(interface{ Unwrap() Driver })
		if !ok {
			return nil
		}
		d = u.Unwrap()
	}
	return nil
}
