package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// subDoc is one subscription. The unique (p, q, s) index makes creation
// idempotent by subscriber even between replicas; an expired holder of the
// subscriber is deleted before a new one is inserted.
type subDoc struct {
	ID string    `bson:"_id"`
	P  string    `bson:"p"`
	Q  string    `bson:"q"`
	S  string    `bson:"s"` // subscriber
	T  int64     `bson:"t"` // ttl, ms
	O  string    `bson:"o"` // options, JSON text
	E  int64     `bson:"e"` // expires
	C  bool      `bson:"c"` // confirmed
	N  bool      `bson:"n"` // needs confirmation
	X  time.Time `bson:"x"` // wall-clock expiry for the TTL index
}

func (s *subDoc) subscription() (storage.Subscription, error) {
	opts, err := decodeMeta(s.O)
	if err != nil {
		return storage.Subscription{}, err
	}
	return storage.Subscription{
		ID: s.ID, Subscriber: s.S, TTL: time.Duration(s.T) * time.Millisecond, Options: opts,
		Expires: time.UnixMilli(s.E), Confirmed: s.C, NeedsConfirmation: s.N,
	}, nil
}

func subFilter(q storage.QueueRef, now int64) bson.D {
	return append(queueFilter(q), bson.E{Key: "e", Value: bson.M{"$gt": now}})
}

// deliverable matches live subscriptions that receive messages.
func deliverable(q storage.QueueRef, now int64) bson.D {
	return append(subFilter(q, now), bson.E{Key: "$or", Value: bson.A{bson.M{"c": true}, bson.M{"n": false}}})
}

type subscriptionStore struct{ d *Driver }

func (s subscriptionStore) Create(ctx context.Context, q storage.QueueRef, sub storage.Subscription) (string, bool, error) {
	const op = storage.OpSubscriptionCreate
	if sub.TTL <= 0 {
		return "", false, storage.E(op, storage.Invalid, "subscription ttl must be positive")
	}
	id, err := storage.CreatedSubscriptionID(sub)
	if err != nil {
		return "", false, err
	}
	opts, err := json.Marshal(sub.Options)
	if err != nil || sub.Options == nil {
		opts = []byte("{}")
	}
	for attempt := 0; attempt < 3; attempt++ {
		now := s.d.now()
		var old subDoc
		err := s.d.subs.FindOne(ctx, append(queueFilter(q), bson.E{Key: "s", Value: sub.Subscriber})).Decode(&old)
		switch {
		case err == nil && old.E > now:
			return old.ID, false, nil
		case err == nil:
			if err := s.drop(ctx, q, old.ID); err != nil {
				return "", false, wrap(op, err)
			}
		case !errors.Is(err, mongo.ErrNoDocuments):
			return "", false, wrap(op, err)
		}
		expires, err := storage.CreatedExpiry(sub, time.UnixMilli(now))
		if err != nil {
			return "", false, err
		}
		e := expires.UnixMilli()
		doc := subDoc{ID: id, P: q.Project, Q: q.Name, S: sub.Subscriber, T: ms(sub.TTL),
			O: string(opts), E: e, N: sub.NeedsConfirmation, X: s.d.wallExpiry(e)}
		_, err = s.d.subs.InsertOne(ctx, doc)
		if err == nil {
			return doc.ID, true, nil
		}
		if !IsDuplicateKey(err) {
			return "", false, wrap(op, err)
		}
		// Another replica created it meanwhile: look again.
	}
	return "", false, storage.E(op, storage.Unavailable, "subscription creation kept racing")
}

func (s subscriptionStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Subscription, error) {
	const op = storage.OpSubscriptionGet
	var doc subDoc
	err := s.d.subs.FindOne(ctx, append(subFilter(q, s.d.now()), bson.E{Key: "_id", Value: id})).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return storage.Subscription{}, storage.E(op, storage.NotFound, "no such subscription")
	}
	if err != nil {
		return storage.Subscription{}, wrap(op, err)
	}
	sub, err := doc.subscription()
	if err != nil {
		return storage.Subscription{}, storage.E(op, storage.Internal, err)
	}
	return sub, nil
}

func (s subscriptionStore) List(ctx context.Context, q storage.QueueRef, o storage.ListSubscriptionsOptions) ([]storage.Subscription, string, error) {
	const op = storage.OpSubscriptionList
	if o.Limit <= 0 {
		return nil, "", storage.E(op, storage.Invalid, "limit must be positive")
	}
	f := subFilter(q, s.d.now())
	if o.Marker != "" {
		f = append(f, bson.E{Key: "_id", Value: bson.M{"$gt": o.Marker}})
	}
	cur, err := s.d.subs.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(o.Limit+1)))
	if err != nil {
		return nil, "", wrap(op, err)
	}
	var docs []subDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, "", wrap(op, err)
	}
	next := ""
	if len(docs) > o.Limit {
		docs = docs[:o.Limit]
		next = docs[o.Limit-1].ID
	}
	out := make([]storage.Subscription, 0, len(docs))
	for i := range docs {
		sub, err := docs[i].subscription()
		if err != nil {
			return nil, "", storage.E(op, storage.Internal, err)
		}
		out = append(out, sub)
	}
	return out, next, nil
}

func (s subscriptionStore) Update(ctx context.Context, q storage.QueueRef, id string, u storage.SubscriptionUpdate) error {
	const op = storage.OpSubscriptionUpdate
	now := s.d.now()
	set := bson.D{}
	if u.Subscriber != nil {
		// An expired holder of the new subscriber must not block it.
		var old subDoc
		err := s.d.subs.FindOne(ctx, append(queueFilter(q), bson.E{Key: "s", Value: *u.Subscriber})).Decode(&old)
		if err == nil && old.ID != id {
			if old.E > now {
				return storage.E(op, storage.Conflict, "the queue already has this subscriber")
			}
			if err := s.drop(ctx, q, old.ID); err != nil {
				return wrap(op, err)
			}
		}
		set = append(set, bson.E{Key: "s", Value: *u.Subscriber})
	}
	if u.TTL != nil {
		if *u.TTL <= 0 {
			return storage.E(op, storage.Invalid, "subscription ttl must be positive")
		}
		e := now + ms(*u.TTL)
		set = append(set, bson.E{Key: "t", Value: ms(*u.TTL)}, bson.E{Key: "e", Value: e}, bson.E{Key: "x", Value: s.d.wallExpiry(e)})
	}
	if u.Options != nil {
		b, err := json.Marshal(u.Options)
		if err != nil {
			return storage.E(op, storage.Invalid, err)
		}
		set = append(set, bson.E{Key: "o", Value: string(b)})
	}
	f := append(subFilter(q, now), bson.E{Key: "_id", Value: id})
	if len(set) == 0 {
		n, err := s.d.subs.CountDocuments(ctx, f)
		if err == nil && n == 0 {
			return storage.E(op, storage.NotFound, "no such subscription")
		}
		return wrap(op, err)
	}
	res, err := s.set(ctx, q, id, f, set)
	if IsDuplicateKey(err) {
		return storage.E(op, storage.Conflict, "the queue already has this subscriber")
	}
	if err != nil {
		return wrap(op, err)
	}
	if res.MatchedCount == 0 {
		return storage.E(op, storage.NotFound, "no such subscription")
	}
	return nil
}

func (s subscriptionStore) Confirm(ctx context.Context, q storage.QueueRef, id string, confirmed bool) error {
	const op = storage.OpSubscriptionConfirm
	res, err := s.set(ctx, q, id, append(subFilter(q, s.d.now()), bson.E{Key: "_id", Value: id}),
		bson.D{{Key: "c", Value: confirmed}})
	if err != nil {
		return wrap(op, err)
	}
	if res.MatchedCount == 0 {
		return storage.E(op, storage.NotFound, "no such subscription")
	}
	return nil
}

func (s subscriptionStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	if id == "" || strings.ContainsAny(id, ".$") {
		return nil // no subscription has such an id
	}
	return wrap(storage.OpSubscriptionDelete, s.drop(ctx, q, id))
}

// drop deletes a subscription, its pending deliveries and its counters.
func (s subscriptionStore) drop(ctx context.Context, q storage.QueueRef, id string) error {
	if _, err := s.d.subs.DeleteOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: id})); err != nil {
		return err
	}
	if _, err := s.d.deliveries.DeleteMany(ctx, append(queueFilter(q), bson.E{Key: "s", Value: id})); err != nil {
		return err
	}
	return s.d.aloneStats(ctx, q.Project, q.Name, func() error {
		_, err := s.d.dstats.UpdateOne(ctx, queueFilter(q), bson.D{{Key: "$unset", Value: bson.D{{Key: "u." + id, Value: ""}}}})
		return err
	})
}

func (s subscriptionStore) Purge(ctx context.Context, q storage.QueueRef) error {
	return wrap(storage.OpSubscriptionPurge, s.d.dropNotifications(ctx, q))
}

// dropNotifications removes every subscription, delivery and delivery
// counter of the queue.
func (d *Driver) dropNotifications(ctx context.Context, q storage.QueueRef) error {
	for _, c := range []*mongo.Collection{d.subs, d.deliveries, d.dstats} {
		if _, err := c.DeleteMany(ctx, queueFilter(q)); err != nil {
			return err
		}
	}
	return nil
}

// set sets fields of subscription id (matched by filter), alone among
// this store's writers of it: its writers change it without reading it
// first, so on FerretDB one would otherwise undo another (DocLocks).
// Subscription ids are unique across queues, so the id names the lock.
func (s subscriptionStore) set(ctx context.Context, q storage.QueueRef, id string, filter, fields bson.D) (res *mongo.UpdateResult, err error) {
	err = s.d.alone(ctx, "sub:"+id, q.Project, q.Name, func() error {
		res, err = s.d.subs.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: fields}})
		return err
	})
	return res, err
}
