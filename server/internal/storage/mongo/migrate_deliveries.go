package mongo

import (
	"context"
	"encoding/json"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// Deliveries pages through the queue's delivery documents in id order,
// each page after the last id of the one before, so deliveries settled
// meanwhile shift nothing.
func (s migrationStore) Deliveries(ctx context.Context, q storage.QueueRef, limit int, f func([]storage.MovedDelivery) error) error {
	const op = storage.OpMigrateDeliveries
	if limit < 1 {
		return storage.E(op, storage.Invalid, storage.ErrArgument)
	}
	after := ""
	for {
		cur, err := s.d.deliveries.Find(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: bson.M{"$gt": after}}),
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
		if err != nil {
			return wrap(op, err)
		}
		var docs []dlvDoc
		if err := cur.All(ctx, &docs); err != nil {
			return wrap(op, err)
		}
		if len(docs) == 0 {
			return nil
		}
		page := make([]storage.MovedDelivery, len(docs))
		for i, doc := range docs {
			page[i] = storage.MovedDelivery{Delivery: storage.Delivery{
				Queue: q, MessageID: doc.M, SubscriptionID: doc.S,
				Body: json.RawMessage(doc.B), TTL: time.Duration(doc.T) * time.Millisecond,
				Posted: time.UnixMilli(doc.C), Expires: time.UnixMilli(doc.E), Attempts: doc.A,
			}, Due: time.UnixMilli(doc.N)}
		}
		if err := f(page); err != nil {
			return err
		}
		after = docs[len(docs)-1].ID
	}
}

// ImportDeliveries inserts a document per delivery whose subscription is
// live here; one pending here already keeps its document (its id is the
// delivery's).
func (s migrationStore) ImportDeliveries(ctx context.Context, q storage.QueueRef, ds []storage.MovedDelivery) error {
	const op = storage.OpMigrateImportDeliveries
	now := s.d.now()
	ds = storage.ImportableDeliveries(ds, time.UnixMilli(now))
	if len(ds) == 0 {
		return nil
	}
	live, err := s.liveSubscriptions(ctx, q, now)
	if err != nil {
		return wrap(op, err)
	}
	var docs []any
	for _, d := range ds {
		if !live[d.SubscriptionID] {
			continue
		}
		e := d.Expires.UnixMilli()
		docs = append(docs, &dlvDoc{ID: d.ID(), P: q.Project, Q: q.Name, M: d.MessageID, S: d.SubscriptionID,
			B: string(d.Body), T: d.TTL.Milliseconds(), C: d.Posted.UnixMilli(), E: e,
			N: d.Due.UnixMilli(), A: d.Attempts, X: s.d.wallExpiry(e)})
	}
	if len(docs) == 0 {
		return nil
	}
	_, err = s.d.deliveries.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if onlyDuplicates(err) {
		return nil
	}
	return wrap(op, err)
}

// liveSubscriptions is the set of the queue's live subscription ids.
func (s migrationStore) liveSubscriptions(ctx context.Context, q storage.QueueRef, now int64) (map[string]bool, error) {
	cur, err := s.d.subs.Find(ctx, subFilter(q, now), options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return nil, err
	}
	var subs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &subs); err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(subs))
	for _, s := range subs {
		live[s.ID] = true
	}
	return live, nil
}

// ImportDeliveryCounts adds st to the queue's counters document in one
// update that also records token; the update skips a document holding the
// token, so a second call adds nothing. Each last error is then set by an
// update of its own whose filter holds only an earlier one: an error the
// target records meanwhile is never replaced by the source's earlier one,
// and setting it again (a resumed move) changes nothing.
func (s migrationStore) ImportDeliveryCounts(ctx context.Context, q storage.QueueRef, st storage.DeliveryStats, token string) error {
	const op = storage.OpMigrateImportCounts
	live, err := s.liveSubscriptions(ctx, q, s.d.now())
	if err != nil {
		return wrap(op, err)
	}
	inc := bson.D{{Key: "d", Value: st.Delivered}, {Key: "f", Value: st.Failed}}
	type lastError struct {
		prefix string // "" for the queue's, "u.<id>." for a subscription's
		text   string
		at     int64
	}
	var errs []lastError
	if !st.LastErrorAt.IsZero() {
		errs = append(errs, lastError{"", st.LastError, st.LastErrorAt.UnixMilli()})
	}
	for _, row := range st.Subscriptions {
		if !live[row.ID] || !storage.IsMessageID(row.ID) {
			continue
		}
		u := "u." + row.ID + "."
		inc = append(inc, bson.E{Key: u + "d", Value: row.Delivered}, bson.E{Key: u + "f", Value: row.Failed})
		if !row.LastErrorAt.IsZero() {
			errs = append(errs, lastError{u, row.LastError, row.LastErrorAt.UnixMilli()})
		}
	}
	filter := append(statsKey(q.Project, q.Name), bson.E{Key: "mv", Value: bson.M{"$ne": token}})
	upd := bson.D{{Key: "$inc", Value: inc}, {Key: "$set", Value: bson.D{{Key: "mv", Value: token}}}}
	return wrap(op, s.d.aloneStats(ctx, q.Project, q.Name, func() error {
		// A document holding the token already is missed by the filter:
		// the retried update then matches nothing, and nothing is added.
		if err := s.d.upsertStatsDoc(ctx, filter, upd); err != nil {
			return err
		}
		// The document exists now: these need no upsert.
		for _, e := range errs {
			earlier := append(statsKey(q.Project, q.Name), bson.E{Key: "$or", Value: bson.A{
				bson.D{{Key: e.prefix + "t", Value: bson.M{"$lt": e.at}}},
				bson.D{{Key: e.prefix + "t", Value: bson.M{"$exists": false}}},
			}})
			set := bson.D{{Key: "$set", Value: bson.D{{Key: e.prefix + "e", Value: e.text}, {Key: e.prefix + "t", Value: e.at}}}}
			if _, err := s.d.dstats.UpdateOne(ctx, earlier, set); err != nil {
				return err
			}
		}
		return nil
	}))
}
