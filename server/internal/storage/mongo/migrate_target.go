package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// The target's part: Prepare, Import, Done. Imported ids are remembered in
// the imported collection, one document per message or claim, so an id
// imported before is never stored again, even after a client deleted it.

// importedDoc records one imported message ("m") or claim ("c").
type importedDoc struct {
	ID string `bson:"_id"`
	P  string `bson:"p"`
	Q  string `bson:"q"`
}

// importedID keys a record by queue and id; the length prefix keeps project
// names apart from queue names, and queue names hold no '/'.
func importedID(q storage.QueueRef, kind, id string) string {
	return strconv.Itoa(len(q.Project)) + ":" + q.Project + q.Name + "/" + kind + ":" + id
}

// Prepare creates the queue with meta unless it exists, raises the floor of
// its positions, and writes meta over the metadata a post created with the
// queue (version 0), never over metadata a client set here since.
func (s migrationStore) Prepare(ctx context.Context, q storage.QueueRef, meta storage.Metadata, floor int64) error {
	const op = storage.OpMigratePrepare
	d := s.d
	mj, err := jsonMeta(op, meta)
	if err != nil {
		return err
	}
	doc, found, err := d.queueDoc(ctx, q)
	if err != nil {
		return wrap(op, err)
	}
	if found && doc.Move.MV != "" {
		if doc.Move.TB == 0 {
			return storage.E(op, storage.Conflict, fmt.Errorf("queue is moving from here to %s", doc.Move.MV))
		}
		// The tombstone of an earlier move away from here: the queue
		// comes back.
		if _, err := d.queues.DeleteOne(ctx, append(queueKey(q), bson.E{Key: "tb", Value: doc.Move.TB})); err != nil {
			return wrap(op, err)
		}
		found = false
	}
	if !found {
		_, err := d.queues.InsertOne(ctx, queueDoc{P: q.Project, N: q.Name, M: mj, Move: moveState{KF: floor, PM: true}})
		if err == nil {
			return nil
		}
		if !IsDuplicateKey(err) {
			return wrap(op, err)
		}
	}
	// Both writes match only while they change something: FerretDB
	// writes an update back as a whole document, so a write that changes
	// nothing could still undo a client's metadata write racing it.
	below := bson.E{Key: "$or", Value: bson.A{bson.M{"kf": bson.M{"$exists": false}}, bson.M{"kf": bson.M{"$lt": floor}}}}
	if _, err := d.queues.UpdateOne(ctx, append(queueKey(q), below), bson.D{{Key: "$set", Value: bson.D{{Key: "kf", Value: floor}}}}); err != nil {
		return wrap(op, err)
	}
	unset := append(queueKey(q), bson.E{Key: "v", Value: bson.M{"$in": bson.A{int64(0), nil}}}, bson.E{Key: "pm", Value: bson.M{"$exists": false}})
	_, err = d.queues.UpdateOne(ctx, unset, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: mj}, {Key: "pm", Value: true}}}})
	return wrap(op, err)
}

// Import stores what of b was not imported before, then records it as
// imported. A crash in between stores nothing twice: the documents keep
// their ids, and a second insert of an id is refused.
func (s migrationStore) Import(ctx context.Context, q storage.QueueRef, b storage.Batch) error {
	const op = storage.OpMigrateImport
	d := s.d
	if b.Empty() {
		return nil
	}
	var keys []string
	for _, m := range b.Messages {
		keys = append(keys, importedID(q, "m", m.ID))
	}
	for _, c := range b.Claims {
		keys = append(keys, importedID(q, "c", c.ID))
	}
	cur, err := d.imported.Find(ctx, bson.M{"_id": bson.M{"$in": keys}}, options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return wrap(op, err)
	}
	var seen []importedDoc
	if err := cur.All(ctx, &seen); err != nil {
		return wrap(op, err)
	}
	done := map[string]bool{}
	for _, r := range seen {
		done[r.ID] = true
	}
	now := d.now()
	var claims, msgs, records []any
	for _, c := range b.Claims {
		if k := importedID(q, "c", c.ID); !done[k] {
			e := c.Expires.UnixMilli()
			claims = append(claims, claimDoc{ID: c.ID, P: q.Project, Q: q.Name, TTL: ms(c.TTL), Grace: ms(c.Grace),
				C: c.Created.UnixMilli(), E: e, X: d.wallExpiry(e)})
			records = append(records, importedDoc{ID: k, P: q.Project, Q: q.Name})
		}
	}
	for _, m := range byNewest(b.Messages) {
		k := importedID(q, "m", m.ID)
		if done[k] {
			continue
		}
		records = append(records, importedDoc{ID: k, P: q.Project, Q: q.Name})
		c := m.Created.UnixMilli()
		e := c + ms(m.TTL)
		if e <= now {
			continue // expired on the way: nothing to keep
		}
		doc := msgDoc{ID: m.ID, P: q.Project, Q: q.Name, K: m.Seq, B: string(m.Body), T: ms(m.TTL), C: c, E: e,
			U: m.ClientID, CC: m.ClaimCount, X: d.wallExpiry(e)}
		if !m.DelayUntil.IsZero() {
			doc.D = m.DelayUntil.UnixMilli()
		}
		if m.ClaimID != "" {
			doc.CL, doc.CE = m.ClaimID, m.ClaimExpires.UnixMilli()
		}
		msgs = append(msgs, doc)
	}
	for _, w := range []struct {
		coll *mongo.Collection
		docs []any
	}{{d.claims, claims}, {d.messages, msgs}, {d.imported, records}} {
		if err := insertInOrder(ctx, w.coll, w.docs); err != nil {
			return wrap(op, err)
		}
	}
	return nil
}

// byNewest returns msgs sorted newest first (by Seq). A batch that is
// imported or settled in several writes goes in this order: a listing that
// meets it part-way sees the batch's newest messages on the target and its
// oldest still on the source, never a gap in the middle, which the pooled
// driver, resuming on the target after the last message it listed on the
// source, would skip or list twice.
func byNewest(msgs []storage.MovedMessage) []storage.MovedMessage {
	out := slices.Clone(msgs)
	slices.SortFunc(out, func(a, b storage.MovedMessage) int { return cmp.Compare(b.Seq, a.Seq) })
	return out
}

// insertInOrder inserts docs one after the other, in one call when none
// exists already, skipping those that do (a batch imported again).
func insertInOrder(ctx context.Context, coll *mongo.Collection, docs []any) error {
	for len(docs) > 0 {
		_, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
		var bwe mongo.BulkWriteException
		if err == nil || !errors.As(err, &bwe) || !onlyDuplicates(err) || len(bwe.WriteErrors) != 1 {
			return err
		}
		// An ordered insert stops at its first error.
		docs = docs[bwe.WriteErrors[0].Index+1:]
	}
	return nil
}

// Done drops the record of imported ids.
func (s migrationStore) Done(ctx context.Context, q storage.QueueRef) error {
	const op = storage.OpMigrateDone
	_, err := s.d.imported.DeleteMany(ctx, queueFilter(q))
	return wrap(op, err)
}

// onlyDuplicates reports an insert error (or none) in which every write that
// failed did so because its id exists already.
func onlyDuplicates(err error) bool {
	if err == nil {
		return true
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		if bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
			return false
		}
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 {
				return false
			}
		}
		return true
	}
	return IsDuplicateKey(err)
}
