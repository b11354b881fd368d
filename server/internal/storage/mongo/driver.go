// Package mongo stores queues, messages and claims in MongoDB (or a server
// speaking its wire protocol, such as FerretDB), registered for the
// "mongodb" URI scheme.
//
// Every message carries a version number. A change of its claim state (claim,
// renew, release, pop, dead-letter move) is a compare-and-swap on that
// version: on MongoDB one updateOne filtered by {_id, v} is enough, because a
// single-document update is atomic there. FerretDB applies an update as a read
// followed by a blind write of the whole document, so two such updates can
// both "win"; against FerretDB the driver therefore first inserts a lock
// document whose _id is "<message id>:<version>" - a unique insert is atomic
// on every backend - and only the inserter that succeeds may write that
// version. See docs/mongodb.md.
package mongo

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

func init() { storage.Register("mongodb", Open) }

// DefaultDatabase is used when the URI names no database, or names one of
// MongoDB's system databases.
const DefaultDatabase = "sluice"

// systemDatabases are never data databases. A connection string's path is
// also its default authentication database, so operators such as the MongoDB
// community operator hand out ".../admin": the credentials live there, the
// queues must not.
var systemDatabases = map[string]bool{"admin": true, "local": true, "config": true}

// DatabaseName is the database a pool URI stores its queues in: the URI's
// path, unless that is empty or a system database (then DefaultDatabase).
// Authentication is unaffected: the driver still authenticates against the
// path (or authSource) as the URI says.
func DatabaseName(uri *url.URL) string {
	name := strings.TrimPrefix(uri.Path, "/")
	if name == "" || systemDatabases[name] {
		return DefaultDatabase
	}
	return name
}

// Driver is a storage.Driver on one MongoDB database.
type Driver struct {
	client   *mongo.Client
	db       *mongo.Database
	queues   *mongo.Collection
	messages *mongo.Collection
	claims   *mongo.Collection
	locks    *mongo.Collection
	// subs, deliveries and dstats hold subscriptions, pending
	// notification deliveries and their per-queue counters.
	subs       *mongo.Collection
	deliveries *mongo.Collection
	dstats     *mongo.Collection
	// imported remembers the ids a move brought here (migrate_target.go).
	imported *mongo.Collection
	clock    storage.Clock
	events   storage.Events

	// lockVersions: the server does not apply single-document updates
	// atomically (FerretDB), so version changes take a lock document first,
	// and writers that do not read first go alone (exclusive).
	lockVersions bool
	exclusive    DocLocks
	// ttlIndexes: the server honours TTL indexes, so expired documents are
	// removed by it; otherwise the driver deletes them itself now and then.
	ttlIndexes bool

	lastKey atomic.Int64 // last message position handed out by this process
	posts   atomic.Int64 // post calls, to pace the cleanup of expired messages
}

// Open connects to uri (see ClientOptions for the defaults), creates the
// indexes and detects what the server can do.
func Open(ctx context.Context, uri *url.URL, opts storage.Options) (storage.Driver, error) {
	opts = opts.WithDefaults()
	const op = "mongo.open"
	client, err := Connect(uri)
	if err != nil {
		return nil, storage.E(op, storage.Invalid, err)
	}
	db := client.Database(DatabaseName(uri))
	d := &Driver{
		client:     client,
		db:         db,
		queues:     db.Collection("queues"),
		messages:   db.Collection("messages"),
		claims:     db.Collection("claims"),
		locks:      db.Collection("locks"),
		subs:       db.Collection("subscriptions"),
		deliveries: db.Collection("deliveries"),
		dstats:     db.Collection("delivery_stats"),
		imported:   db.Collection("imported"),
		clock:      opts.Clock,
		events:     opts.Events,
	}
	key := uri.Redacted()
	if caps, ok := setupDone.Load(key); ok {
		d.lockVersions, d.ttlIndexes = caps.(serverCaps).lockVersions, caps.(serverCaps).ttlIndexes
	} else {
		if err := d.setup(ctx); err != nil {
			_ = client.Disconnect(context.Background())
			return nil, err
		}
		setupDone.Store(key, serverCaps{d.lockVersions, d.ttlIndexes})
	}
	d.exclusive = DocLocks{coll: d.locks, needed: d.lockVersions}
	return d, nil
}

// setupDone remembers, per URI, that this process already created the
// indexes and what the server can do, so reopening a pool is cheap.
var setupDone sync.Map

type serverCaps struct{ lockVersions, ttlIndexes bool }

// setup detects FerretDB and creates the indexes. It is idempotent, so every
// replica runs it at start.
func (d *Driver) setup(ctx context.Context) error {
	const op = "mongo.setup"
	ferret, err := updatesNeedLocks(ctx, d.db)
	if err != nil {
		return err
	}
	d.lockVersions = ferret
	idx := []struct {
		coll *mongo.Collection
		m    mongo.IndexModel
	}{
		{d.queues, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "n", Value: 1}}, Options: options.Index().SetUnique(true).SetName("project_name")}},
		{d.messages, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}, {Key: "k", Value: 1}}, Options: options.Index().SetName("queue_position")}},
		{d.messages, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}, {Key: "cl", Value: 1}}, Options: options.Index().SetName("queue_claim")}},
		{d.claims, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}}, Options: options.Index().SetName("queue")}},
		{d.locks, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}}, Options: options.Index().SetName("queue")}},
		{d.locks, mongo.IndexModel{Keys: bson.D{{Key: "m", Value: 1}}, Options: options.Index().SetName("message")}},
		{d.subs, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}, {Key: "s", Value: 1}}, Options: options.Index().SetUnique(true).SetName("queue_subscriber")}},
		{d.deliveries, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetName("due")}},
		{d.deliveries, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}, {Key: "s", Value: 1}}, Options: options.Index().SetName("queue_subscription")}},
		{d.dstats, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}}, Options: options.Index().SetUnique(true).SetName("queue")}},
		{d.imported, mongo.IndexModel{Keys: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: 1}}, Options: options.Index().SetName("queue")}},
	}
	for _, i := range idx {
		if _, err := i.coll.Indexes().CreateOne(ctx, i.m); err != nil {
			return storage.E(op, kindOf(err), err)
		}
	}
	// TTL indexes remove expired documents on MongoDB. FerretDB 1.x refuses
	// the option (NotImplemented); reads filter expiry either way.
	d.ttlIndexes = true
	for _, c := range []*mongo.Collection{d.messages, d.claims, d.locks, d.subs, d.deliveries} {
		m := mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0).SetName("expire")}
		if _, err := c.Indexes().CreateOne(ctx, m); err != nil {
			if isNotImplemented(err) {
				d.ttlIndexes = false
				break
			}
			return storage.E(op, kindOf(err), err)
		}
	}
	return nil
}

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

// Ping checks that the server answers.
func (d *Driver) Ping(ctx context.Context) error {
	if err := d.db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		return storage.E("mongo.ping", storage.Unavailable, err)
	}
	return nil
}

// Close disconnects.
func (d *Driver) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.client.Disconnect(ctx)
}

// now is the driver's clock in Unix milliseconds, the unit of every stored time.
func (d *Driver) now() int64 { return d.clock.Now().UnixMilli() }

// wallExpiry turns an expiry on the driver's clock into a wall-clock date for
// the TTL index: the server's TTL monitor runs on real time, so an injected
// clock must never make it delete a document early.
func (d *Driver) wallExpiry(expiresMs int64) time.Time {
	return time.Now().Add(time.Duration(expiresMs-d.now()) * time.Millisecond)
}

// nextKeys reserves n increasing message positions: the clock in
// microseconds, never below the last one handed out by this process, so a
// queue stays FIFO even when the clock stands still.
func (d *Driver) nextKeys(n int) int64 { return d.nextKeysAbove(n, 0) }

// nextKeysAbove is nextKeys for a queue whose positions must stay above
// floor (a queue moved here from a backend that numbered further).
func (d *Driver) nextKeysAbove(n int, floor int64) int64 {
	base := max(d.clock.Now().UnixMicro(), floor+1)
	for {
		last := d.lastKey.Load()
		start := max(base, last+1)
		if d.lastKey.CompareAndSwap(last, start+int64(n)-1) {
			return start
		}
	}
}
