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
	cur, err := s.d.subs.Find(ctx, subFilter(q, now), options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return wrap(op, err)
	}
	var subs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &subs); err != nil {
		return wrap(op, err)
	}
	live := make(map[string]bool, len(subs))
	for _, s := range subs {
		live[s.ID] = true
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
