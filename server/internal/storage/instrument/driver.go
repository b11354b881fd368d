package instrument

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
)

// Driver is a storage.Driver whose calls are timed. Wrap returns it, or a
// value that also implements storage.DepthReporter, storage.Inspector and/or
// storage.Migrator exactly when the wrapped driver does, and whose message
// store is a storage.Remover exactly when the driver's is, so type
// assertions on the result answer as they would on the driver itself.
type Driver struct {
	d storage.Driver
	r *recorder
	// The timed stores, each held as the interface its accessor returns:
	// converting a store struct to an interface on every call would
	// allocate once per request.
	q storage.QueueStore
	m storage.MessageStore
	c storage.ClaimStore
	s storage.SubscriptionStore
	v storage.DeliveryStore
}

// Wrap instruments d under the driver label name, registering the metric
// families on reg (wrapping several drivers on one registry is fine; each
// gets its own label value). It fails only if reg already holds different
// metrics under the same names.
func Wrap(d storage.Driver, name string, reg prometheus.Registerer) (storage.Driver, error) {
	r, err := newRecorder(name, reg)
	if err != nil {
		return nil, err
	}
	w := &Driver{d: d, r: r}
	w.q = queues{d.Queues(), r}
	w.m = messages{d.Messages(), r}
	if rm, ok := d.Messages().(storage.Remover); ok {
		w.m = remover{messages{d.Messages(), r}, rm}
	}
	w.c = claims{d.Claims(), r}
	w.s = subscriptions{d.Subscriptions(), r}
	w.v = deliveries{d.Deliveries(), r}
	return withOptional(w, d), nil
}

// Optional interfaces of the wrapped driver, passed through unchanged.
type (
	inspector = storage.Inspector
	migrator  = storage.Migrator
)

// withOptional returns w, embedded with exactly the optional interfaces d
// implements: depth (timed), the leftover check and moving a queue (passed
// through; the mover's steps are few and timed by the mover itself).
func withOptional(w *Driver, d storage.Driver) storage.Driver {
	dr, hasDepth := d.(storage.DepthReporter)
	in, hasInsp := d.(storage.Inspector)
	mg, hasMig := d.(storage.Migrator)
	dp := depth{dr, w.r}
	switch {
	case hasDepth && hasInsp && hasMig:
		return struct {
			*Driver
			depth
			inspector
			migrator
		}{w, dp, in, mg}
	case hasDepth && hasInsp:
		return struct {
			*Driver
			depth
			inspector
		}{w, dp, in}
	case hasDepth && hasMig:
		return struct {
			*Driver
			depth
			migrator
		}{w, dp, mg}
	case hasInsp && hasMig:
		return struct {
			*Driver
			inspector
			migrator
		}{w, in, mg}
	case hasDepth:
		return struct {
			*Driver
			depth
		}{w, dp}
	case hasInsp:
		return struct {
			*Driver
			inspector
		}{w, in}
	case hasMig:
		return struct {
			*Driver
			migrator
		}{w, mg}
	}
	return w
}

// Unwrap returns the instrumented driver (for driver-specific methods).
func (w *Driver) Unwrap() storage.Driver { return w.d }

// Queues returns the timed queue store.
func (w *Driver) Queues() storage.QueueStore { return w.q }

// Messages returns the timed message store.
func (w *Driver) Messages() storage.MessageStore { return w.m }

// Claims returns the timed claim store.
func (w *Driver) Claims() storage.ClaimStore { return w.c }

// Subscriptions returns the timed subscription store.
func (w *Driver) Subscriptions() storage.SubscriptionStore { return w.s }

// Deliveries returns the timed delivery store.
func (w *Driver) Deliveries() storage.DeliveryStore { return w.v }

// Ping times the driver's Ping.
func (w *Driver) Ping(ctx context.Context) error {
	start := time.Now()
	err := w.d.Ping(ctx)
	w.r.done(opPing, start, err)
	return err
}

// Close closes the driver.
func (w *Driver) Close() error { return w.d.Close() }

type depth struct {
	d storage.DepthReporter
	r *recorder
}

// Depth times the driver's scrape-time depth count.
func (x depth) Depth(ctx context.Context) (storage.Depth, error) {
	start := time.Now()
	v, err := x.d.Depth(ctx)
	x.r.done(opDepth, start, err)
	return v, err
}
