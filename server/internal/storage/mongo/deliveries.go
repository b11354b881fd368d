package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// dlvDoc is one pending delivery. It carries its own copy of the message
// body, so that consuming the message does not cancel the notification.
// Leases are versioned like messages' claim state (see versions.go).
type dlvDoc struct {
	ID string    `bson:"_id"` // storage.Delivery.ID()
	P  string    `bson:"p"`
	Q  string    `bson:"q"`
	M  string    `bson:"m"` // message id
	S  string    `bson:"s"` // subscription id
	B  string    `bson:"b"`
	T  int64     `bson:"t"`
	C  int64     `bson:"c"`
	E  int64     `bson:"e"`
	N  int64     `bson:"n"` // next attempt; while leased, the lease's end
	A  int       `bson:"a"` // failed attempts
	L  string    `bson:"l"` // lease token
	V  int64     `bson:"v"`
	X  time.Time `bson:"x"`
}

// recordDeliveries inserts the deliveries of a batch about to be posted:
// one per message and deliverable live subscription. They are written
// before the messages, and deleted again if the messages cannot be, so an
// acknowledged post always has its deliveries (MongoDB offers no atomic
// write across documents without transactions, which FerretDB lacks); a
// crash between the two writes can only yield a notification for a post
// that was never acknowledged, never lose one.
func (d *Driver) recordDeliveries(ctx context.Context, q storage.QueueRef, ids []string, docs []any, now int64) ([]string, error) {
	cur, err := d.subs.Find(ctx, deliverable(q, now), options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return nil, err
	}
	var subs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &subs); err != nil || len(subs) == 0 {
		return nil, err
	}
	var out []any
	var made []string
	for i, raw := range docs {
		m := raw.(*msgDoc)
		for _, s := range subs {
			dl := &dlvDoc{ID: ids[i] + "." + s.ID, P: q.Project, Q: q.Name, M: ids[i], S: s.ID,
				B: m.B, T: m.T, C: now, E: m.E, N: now, X: m.X}
			out = append(out, dl)
			made = append(made, dl.ID)
		}
	}
	if _, err := d.deliveries.InsertMany(ctx, out); err != nil {
		_, _ = d.deliveries.DeleteMany(context.WithoutCancel(ctx), bson.M{"_id": bson.M{"$in": made}})
		return nil, err
	}
	return made, nil
}

type deliveryStore struct{ d *Driver }

func statsKey(p, q string) bson.D { return bson.D{{Key: "p", Value: p}, {Key: "q", Value: q}} }

// aloneStats runs write, which changes the queue's counters document,
// alone among this store's writers of it (see alone); the lock's length
// prefix keeps one queue's name apart from another's.
func (d *Driver) aloneStats(ctx context.Context, p, q string, write func() error) error {
	return d.alone(ctx, "stats:"+strconv.Itoa(len(p))+":"+p+q, p, q, write)
}

// count adds to a queue's delivery counters (c is "d" or "f"), and records
// the error text when there is one.
func (d *Driver) count(ctx context.Context, p, q, sid, c, errText string, now int64) error {
	upd := bson.D{{Key: "$inc", Value: bson.D{{Key: c, Value: 1}, {Key: "u." + sid + "." + c, Value: 1}}}}
	if errText != "" {
		upd = append(upd, bson.E{Key: "$set", Value: bson.D{{Key: "e", Value: errText}, {Key: "t", Value: now},
			{Key: "u." + sid + ".e", Value: errText}, {Key: "u." + sid + ".t", Value: now}}})
	}
	return d.upsertStats(ctx, p, q, upd)
}

// upsertStats applies upd to the queue's counters document, creating it
// if need be, alone among this store's writers of it.
func (d *Driver) upsertStats(ctx context.Context, p, q string, upd bson.D) error {
	return d.aloneStats(ctx, p, q, func() error { return d.upsertStatsDoc(ctx, statsKey(p, q), upd) })
}

// upsertStatsDoc applies upd to the counters document filter matches,
// or to a new one. Its callers hold the queue's counters lock.
func (d *Driver) upsertStatsDoc(ctx context.Context, filter, upd bson.D) error {
	_, err := d.dstats.UpdateOne(ctx, filter, upd, options.UpdateOne().SetUpsert(true))
	if IsDuplicateKey(err) {
		// An upsert race, or a filter narrower than the queue missed its
		// document, and the upsert met it on the unique (p, q).
		_, err = d.dstats.UpdateOne(ctx, filter, upd)
	}
	return err
}

func (s deliveryStore) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	const op = storage.OpDeliveryLease
	if limit <= 0 || hold <= 0 {
		return nil, time.Time{}, storage.E(op, storage.Invalid, "limit and hold must be positive")
	}
	now := s.d.now()
	cur, err := s.d.deliveries.Find(ctx, bson.M{"n": bson.M{"$lte": now}},
		options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, time.Time{}, wrap(op, err)
	}
	var docs []dlvDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, time.Time{}, wrap(op, err)
	}
	token := storage.NewID()
	live := map[string]bool{}
	var out []storage.Delivery
	for i := range docs {
		doc := &docs[i]
		key := doc.P + "\x00" + doc.Q + "\x00" + doc.S
		ok, seen := live[key]
		if !seen {
			n, err := s.d.subs.CountDocuments(ctx, append(subFilter(storage.QueueRef{Project: doc.P, Name: doc.Q}, now),
				bson.E{Key: "_id", Value: doc.S}))
			if err != nil {
				return nil, time.Time{}, wrap(op, err)
			}
			ok = n > 0
			live[key] = ok
		}
		got, err := s.d.acquireVersion(ctx, "dl:"+doc.ID, doc.V, doc.P, doc.Q)
		if err != nil {
			return nil, time.Time{}, wrap(op, err)
		}
		if !got {
			continue // another replica is leasing it
		}
		f := bson.D{{Key: "_id", Value: doc.ID}, {Key: "v", Value: doc.V}}
		if doc.E <= now || !ok {
			res, err := s.d.deliveries.DeleteOne(ctx, f)
			if err != nil {
				return nil, time.Time{}, wrap(op, err)
			}
			if res.DeletedCount == 1 {
				sid := doc.S
				if !ok {
					sid = "_" // counted for the queue only: the subscription is gone
				}
				if err := s.d.count(ctx, doc.P, doc.Q, sid, "f", "", now); err != nil {
					return nil, time.Time{}, wrap(op, err)
				}
			}
			continue
		}
		res, err := s.d.deliveries.UpdateOne(ctx, f, bson.D{{Key: "$set", Value: bson.D{
			{Key: "n", Value: now + hold.Milliseconds()}, {Key: "l", Value: token}, {Key: "v", Value: doc.V + 1}}}})
		if err != nil {
			return nil, time.Time{}, wrap(op, err)
		}
		if res.MatchedCount == 1 {
			out = append(out, storage.Delivery{
				Queue: storage.QueueRef{Project: doc.P, Name: doc.Q}, MessageID: doc.M, SubscriptionID: doc.S,
				Body: json.RawMessage(doc.B), TTL: time.Duration(doc.T) * time.Millisecond,
				Posted: time.UnixMilli(doc.C), Expires: time.UnixMilli(doc.E), Attempts: doc.A, Lease: token,
			})
		}
	}
	return out, s.nextDue(ctx, now), nil
}

// nextDue is when the earliest pending delivery falls due; zero when none
// is pending. When the store cannot say, it answers now (look again soon)
// rather than fail a lease whose deliveries are already held.
func (s deliveryStore) nextDue(ctx context.Context, now int64) time.Time {
	var first struct {
		N int64 `bson:"n"`
	}
	err := s.d.deliveries.FindOne(ctx, bson.M{},
		options.FindOne().SetSort(bson.D{{Key: "n", Value: 1}}).SetProjection(bson.M{"n": 1})).Decode(&first)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return time.Time{}
	case err != nil:
		return time.UnixMilli(now)
	}
	return time.UnixMilli(first.N)
}

// settle removes a delivery and counts it.
func (s deliveryStore) settle(ctx context.Context, op string, dl storage.Delivery, c, errText string) error {
	res, err := s.d.deliveries.DeleteOne(ctx, append(queueFilter(dl.Queue), bson.E{Key: "_id", Value: dl.ID()}))
	if err != nil || res.DeletedCount == 0 {
		return wrap(op, err)
	}
	if s.d.lockVersions {
		_, _ = s.d.locks.DeleteMany(ctx, bson.M{"m": "dl:" + dl.ID()})
	}
	return wrap(op, s.d.count(ctx, dl.Queue.Project, dl.Queue.Name, dl.SubscriptionID, c, errText, s.d.now()))
}

func (s deliveryStore) Ack(ctx context.Context, dl storage.Delivery) error {
	return s.settle(ctx, storage.OpDeliveryAck, dl, "d", "")
}

func (s deliveryStore) Fail(ctx context.Context, dl storage.Delivery, errText string) error {
	return s.settle(ctx, storage.OpDeliveryFail, dl, "f", errText)
}

func (s deliveryStore) Release(ctx context.Context, dl storage.Delivery, at time.Time) error {
	_, err := s.d.deliveries.UpdateOne(ctx,
		append(queueFilter(dl.Queue), bson.E{Key: "_id", Value: dl.ID()}, bson.E{Key: "l", Value: dl.Lease}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: at.UnixMilli()}, {Key: "l", Value: ""}}},
			{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
	return wrap(storage.OpDeliveryRelease, err)
}

func (s deliveryStore) Retry(ctx context.Context, dl storage.Delivery, at time.Time, errText string) error {
	const op = storage.OpDeliveryRetry
	now := s.d.now()
	res, err := s.d.deliveries.UpdateOne(ctx,
		append(queueFilter(dl.Queue), bson.E{Key: "_id", Value: dl.ID()}, bson.E{Key: "l", Value: dl.Lease}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: at.UnixMilli()}, {Key: "l", Value: ""}}},
			{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}, {Key: "v", Value: 1}}}})
	if err != nil || res.MatchedCount == 0 {
		return wrap(op, err)
	}
	set := bson.D{{Key: "e", Value: errText}, {Key: "t", Value: now},
		{Key: "u." + dl.SubscriptionID + ".e", Value: errText}, {Key: "u." + dl.SubscriptionID + ".t", Value: now}}
	return wrap(op, s.d.upsertStats(ctx, dl.Queue.Project, dl.Queue.Name, bson.D{{Key: "$set", Value: set}}))
}

// statsDoc is a queue's delivery counters.
type statsDoc struct {
	D int64                  `bson:"d"`
	F int64                  `bson:"f"`
	E string                 `bson:"e"`
	T int64                  `bson:"t"`
	U map[string]subStatsDoc `bson:"u"`
	// MV is the token of the move whose counts were added here.
	MV string `bson:"mv,omitempty"`
}

type subStatsDoc struct {
	D int64  `bson:"d"`
	F int64  `bson:"f"`
	E string `bson:"e"`
	T int64  `bson:"t"`
}

func msOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (s deliveryStore) Stats(ctx context.Context, q storage.QueueRef) (storage.DeliveryStats, error) {
	const op = storage.OpDeliveryStats
	now := s.d.now()
	var st storage.DeliveryStats
	var sd statsDoc
	err := s.d.dstats.FindOne(ctx, queueFilter(q)).Decode(&sd)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return st, wrap(op, err)
	}
	st.Delivered, st.Failed, st.LastError, st.LastErrorAt = sd.D, sd.F, sd.E, msOrZero(sd.T)
	subs, _, err := subscriptionStore{s.d}.List(ctx, q, storage.ListSubscriptionsOptions{Limit: 1 << 20})
	if err != nil {
		return st, err
	}
	for _, sub := range subs {
		n, err := s.d.deliveries.CountDocuments(ctx, append(queueFilter(q), bson.E{Key: "s", Value: sub.ID},
			bson.E{Key: "e", Value: bson.M{"$gt": now}}))
		if err != nil {
			return st, wrap(op, err)
		}
		u := sd.U[sub.ID]
		st.Pending += n
		st.Subscriptions = append(st.Subscriptions, storage.SubscriptionDeliveries{
			ID: sub.ID, Subscriber: sub.Subscriber, Pending: n, Delivered: u.D, Failed: u.F,
			LastError: u.E, LastErrorAt: msOrZero(u.T),
		})
	}
	return st, nil
}

func (s deliveryStore) Pending(ctx context.Context) (int64, error) {
	n, err := s.d.deliveries.CountDocuments(ctx, bson.M{"e": bson.M{"$gt": s.d.now()}})
	return n, wrap(storage.OpDeliveryPending, err)
}
