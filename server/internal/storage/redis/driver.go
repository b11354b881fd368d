// Package redis is the Redis storage driver.
//
// Every state change is one Lua script (the .lua file next to the Go method
// that runs it), so each API call is one atomic round trip. Time comes from
// the injected clock as an argument, and expiry needs no sweeper: reads
// filter by time, the scripts that take or count messages first apply what
// fell due on their queue (lapsed claims, ended delays, expired messages;
// bounded per call; posting runs only the expiry step, single deletes
// none), and
// every message, claim and index key carries a Redis TTL so data nobody
// touches again disappears by itself.
//
// Redis Cluster is not supported: a queue's keys share one hash slot, but
// project indexes and dead-letter moves span slots. Sentinel is.
package redis

import (
	"context"
	"net/url"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
)

func init() {
	storage.Register("redis", func(ctx context.Context, u *url.URL, opts storage.Options) (storage.Driver, error) {
		return Open(ctx, u, opts)
	})
}

// Driver is the Redis driver. It implements storage.Driver,
// storage.DepthReporter and storage.Inspector.
type Driver struct {
	c      *goredis.Client
	fc     functionCaller // what scripts run through: c, with group commit
	clock  storage.Clock
	events storage.Events
}

// Open builds a driver for a redis:// or rediss:// URI (see clientConfig
// for the forms, Sentinel included). It does not wait for Redis: a server
// may start before its Redis does and answers 503 until it is reachable.
func Open(ctx context.Context, u *url.URL, opts storage.Options) (*Driver, error) {
	cfg, err := parseURI(u)
	if err != nil {
		return nil, storage.E("redis.open", storage.Invalid, err)
	}
	c := cfg.client()
	opts = opts.WithDefaults()
	d := &Driver{c: c, clock: opts.Clock, events: opts.Events}
	d.fc = newGroupCommit(d.c, groupSenders, groupMaxBatch)
	preload(ctx, d.c)
	return d, nil
}

// Client exposes the go-redis client (for the pooling catalog and tests).
func (d *Driver) Client() *goredis.Client { return d.c }

// Queues returns the queue store.
func (d *Driver) Queues() storage.QueueStore { return queueStore{d} }

// Messages returns the message store.
func (d *Driver) Messages() storage.MessageStore { return messageStore{d} }

// Claims returns the claim store.
func (d *Driver) Claims() storage.ClaimStore { return claimStore{d} }

// Subscriptions returns the subscription store.
func (d *Driver) Subscriptions() storage.SubscriptionStore { return subscriptionStore{d} }

// Deliveries returns the delivery store.
func (d *Driver) Deliveries() storage.DeliveryStore { return deliveryStore{d} }

// Ping checks that Redis answers.
func (d *Driver) Ping(ctx context.Context) error {
	return wrap("redis.ping", d.c.Ping(ctx).Err())
}

// Close closes the connection pool.
func (d *Driver) Close() error { return d.c.Close() }

// nowMS is the injected clock in Unix milliseconds, the unit of every
// stored time.
func (d *Driver) nowMS() int64 { return d.clock.Now().UnixMilli() }

// lapsed reports claim expirations a script noticed.
func (d *Driver) lapsed(n int64) {
	if n > 0 {
		d.events.ClaimsExpired(int(n))
	}
}
