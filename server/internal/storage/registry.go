package storage

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"sync"
)

// Options are what every driver factory receives besides its URI.
type Options struct {
	// Clock drives TTLs and claim expiry; nil means the wall clock.
	Clock Clock
	// Events receives claim expirations and dead-letter moves; nil means
	// NopEvents.
	Events Events
}

// WithDefaults fills unset options: the wall clock and NopEvents. Open applies
// it; drivers constructed directly (tests, the pooled driver) apply it too.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Events == nil {
		o.Events = NopEvents{}
	}
	return o
}

// Factory opens a driver for a URI of its scheme.
type Factory func(ctx context.Context, uri *url.URL, opts Options) (Driver, error)

var (
	factoriesMu sync.RWMutex
	factories   = map[string]Factory{}
)

// Register makes a driver available for a URI scheme ("memory", "redis",
// "mongodb"). Drivers call it from init; registering a scheme twice panics.
func Register(scheme string, f Factory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if _, dup := factories[scheme]; dup {
		panic("storage: driver registered twice for scheme " + scheme)
	}
	factories[scheme] = f
}

// Schemes lists the registered URI schemes, sorted.
func Schemes() []string {
	factoriesMu.RLock()
	defer factoriesMu.RUnlock()
	out := make([]string, 0, len(factories))
	for s := range factories {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open parses uri ("memory", "redis://host:6379/0", "mongodb://...") and opens
// the driver registered for its scheme. A bare word is taken as a scheme.
func Open(ctx context.Context, uri string, opts Options) (Driver, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, E("storage.open", Invalid, fmt.Errorf("bad store URI: %w", err))
	}
	scheme := u.Scheme
	if scheme == "" {
		scheme = u.Path // "memory"
	}
	if scheme == "rediss" {
		scheme = "redis"
	}
	if scheme == "mongodb+srv" {
		scheme = "mongodb"
	}
	factoriesMu.RLock()
	f, ok := factories[scheme]
	factoriesMu.RUnlock()
	if !ok {
		return nil, E("storage.open", Invalid, fmt.Sprintf("no storage driver for scheme %q (have %v)", scheme, Schemes()))
	}
	return f(ctx, u, opts.WithDefaults())
}
