package mongo

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// The source's batches: Take puts one in transit, InTransit reads it back,
// Settle ends it (migrate.go explains the transit name).

// gatherRounds bounds how often Take goes back for messages of a claim it
// found on a message already in transit (a claim made while the batch was
// being taken can reach one more message).
const gatherRounds = 8

var newestFirst = bson.D{{Key: "k", Value: -1}, {Key: "_id", Value: -1}}

// Take marks the queue as taking (from then on claims and pops answer
// Moving and Unseal is refused), renames up to limit of the newest live
// messages, then every message of a live claim holding one of them, and the
// claims themselves, to the transit name. A batch already in transit is
// completed and returned instead.
func (s migrationStore) Take(ctx context.Context, q storage.QueueRef, limit int) (storage.Batch, error) {
	const op = storage.OpMigrateTake
	d := s.d
	if limit <= 0 {
		return storage.Batch{}, storage.E(op, storage.Invalid, errors.New("limit must be positive"))
	}
	doc, finished, err := d.sealedDoc(ctx, op, q)
	switch {
	case err != nil:
		return storage.Batch{}, err
	case finished:
		return storage.Batch{}, storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
	}
	if !doc.Move.TR || !doc.Move.TK {
		if _, err := d.queues.UpdateOne(ctx, queueKey(q), bson.D{{Key: "$set", Value: bson.D{{Key: "tr", Value: true}, {Key: "tk", Value: true}}}}); err != nil {
			return storage.Batch{}, wrap(op, err)
		}
	}
	tq := transitRef(q)
	n, err := d.messages.CountDocuments(ctx, queueFilter(tq), options.Count().SetLimit(1))
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	if n == 0 {
		if err := d.takeNewest(ctx, q, limit); err != nil {
			return storage.Batch{}, wrap(op, err)
		}
	}
	if err := d.gatherClaims(ctx, q); err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	b, err := d.transit(ctx, q)
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	if b.Empty() {
		// Nothing left to move: claims may go on.
		if err := d.endTransit(ctx, q); err != nil {
			return storage.Batch{}, wrap(op, err)
		}
	}
	return b, nil
}

// takeNewest renames up to limit of the newest live messages to the transit
// name. Clients delete while it runs: when every message it read was gone
// before its rename it reads again (bounded), since an empty transit tells
// the mover the queue is empty.
func (d *Driver) takeNewest(ctx context.Context, q storage.QueueRef, limit int) error {
	tq := transitRef(q)
	for attempt := 0; attempt < 8; attempt++ {
		docs, err := d.findMessages(ctx, append(queueFilter(q), alive(d.now())), options.Find().SetSort(newestFirst).SetLimit(int64(limit)))
		if err != nil || len(docs) == 0 {
			return err
		}
		if err := d.renameAll(ctx, docs, q, tq); err != nil {
			return err
		}
		n, err := d.messages.CountDocuments(ctx, queueFilter(tq), options.Count().SetLimit(1))
		if err != nil || n > 0 {
			return err
		}
	}
	return storage.E(storage.OpMigrateTake, storage.Unavailable, storage.ErrMoving)
}

// InTransit returns the batch in transit, completing a Take that stopped
// part-way so a claim is never split.
func (s migrationStore) InTransit(ctx context.Context, q storage.QueueRef) (storage.Batch, error) {
	const op = storage.OpMigrateInTransit
	d := s.d
	doc, found, err := d.queueDoc(ctx, q)
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	if !found || !doc.Move.TR {
		return storage.Batch{}, nil
	}
	if err := d.gatherClaims(ctx, q); err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	b, err := d.transit(ctx, q)
	return b, wrap(op, err)
}

// Settle moves b's messages and claims from transit to the moved records;
// once nothing is left in transit, claims may go on. Calls naming them
// answer Moved from then on (whereAre).
func (s migrationStore) Settle(ctx context.Context, q storage.QueueRef, b storage.Batch) error {
	const op = storage.OpMigrateSettle
	d := s.d
	_, finished, err := d.sealedDoc(ctx, op, q)
	if err != nil || finished {
		return err // finished: nothing is in transit any more
	}
	tq := queueFilter(transitRef(q))
	ids := make([]string, len(b.Messages))
	for i, m := range byNewest(b.Messages) {
		ids[i] = m.ID
	}
	cids := make([]string, len(b.Claims))
	for i, c := range b.Claims {
		cids[i] = c.ID
	}
	// Kept under the moved name, bodies dropped: calls naming them are
	// sent on (whereAre). One write per message, in one ordered call,
	// newest first (byNewest says why).
	moved := movedRef(q).Name
	settle := bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: moved}, {Key: "b", Value: ""}, {Key: "e", Value: int64(0)}}}}
	if len(ids) > 0 {
		writes := make([]mongo.WriteModel, len(ids))
		for i, id := range ids {
			writes[i] = mongo.NewUpdateOneModel().SetFilter(append(tq[:len(tq):len(tq)], bson.E{Key: "_id", Value: id})).SetUpdate(settle)
		}
		if _, err := d.messages.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(true)); err != nil {
			return wrap(op, err)
		}
	}
	if _, err := d.claims.UpdateMany(ctx, append(tq, bson.E{Key: "_id", Value: bson.M{"$in": cids}}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: moved}}}}); err != nil {
		return wrap(op, err)
	}
	if err := d.dropLocks(ctx, ids); err != nil {
		return wrap(op, err)
	}
	n, err := d.messages.CountDocuments(ctx, tq, options.Count().SetLimit(1))
	if err != nil {
		return wrap(op, err)
	}
	if n == 0 {
		return wrap(op, d.endTransit(ctx, q))
	}
	return nil
}

// endTransit clears the transit mark once nothing is in transit; claims
// left under the transit name (their messages expired) go with it.
func (d *Driver) endTransit(ctx context.Context, q storage.QueueRef) error {
	if _, err := d.claims.DeleteMany(ctx, queueFilter(transitRef(q))); err != nil {
		return err
	}
	_, err := d.queues.UpdateOne(ctx, queueKey(q), bson.D{{Key: "$unset", Value: bson.D{{Key: "tr", Value: ""}}}})
	return err
}

// renameAll renames docs from q to tq with a few writes for the whole
// batch: each message still only at the version it was read at (a claim
// that changed it first wins), under its version lock on FerretDB. The
// ones that changed meanwhile go through rename one at a time.
func (d *Driver) renameAll(ctx context.Context, docs []msgDoc, q, tq storage.QueueRef) error {
	if len(docs) == 0 {
		return nil
	}
	mine := make([]msgDoc, 0, len(docs))
	if d.lockVersions {
		locks := make([]any, len(docs))
		for i := range docs {
			locks[i] = lockDoc{ID: docs[i].ID + ":" + strconv.FormatInt(docs[i].V, 10), M: docs[i].ID, V: docs[i].V,
				P: docs[i].P, Q: docs[i].Q, X: time.Now().Add(lockLease)}
		}
		_, err := d.locks.InsertMany(ctx, locks, options.InsertMany().SetOrdered(false))
		lost := map[int]bool{}
		var bwe mongo.BulkWriteException
		switch {
		case err == nil:
		case errors.As(err, &bwe) && onlyDuplicates(err):
			for _, we := range bwe.WriteErrors {
				lost[we.Index] = true
			}
		default:
			return err
		}
		for i := range docs {
			if !lost[i] {
				mine = append(mine, docs[i])
			}
		}
	} else {
		mine = docs
	}
	if len(mine) > 0 {
		at := make(bson.A, len(mine))
		for i := range mine {
			at[i] = bson.M{"_id": mine[i].ID, "v": mine[i].V}
		}
		_, err := d.messages.UpdateMany(ctx, append(queueFilter(q), bson.E{Key: "$or", Value: at}),
			bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: tq.Name}}}, {Key: "$inc", Value: bson.D{{Key: "v", Value: int64(1)}}}})
		if err != nil {
			return err
		}
	}
	// Whatever is still here changed under us (or lost its lock): one at
	// a time, re-reading it.
	ids := make([]string, len(docs))
	for i := range docs {
		ids[i] = docs[i].ID
	}
	left, err := d.findMessages(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: bson.M{"$in": ids}}), options.Find())
	if err != nil {
		return err
	}
	for i := range left {
		if err := d.rename(ctx, &left[i], q, tq); err != nil {
			return err
		}
	}
	return nil
}

// rename moves one message from q to tq by a version change, re-reading it
// when a concurrent writer changed it first; a message deleted (or taken by
// another mover) meanwhile is skipped.
func (d *Driver) rename(ctx context.Context, doc *msgDoc, q, tq storage.QueueRef) error {
	for attempt := 0; attempt < 8; attempt++ {
		ok, err := d.writeVersion(ctx, doc, bson.D{{Key: "q", Value: tq.Name}})
		if err != nil || ok {
			return err
		}
		var fresh msgDoc
		err = d.messages.FindOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: doc.ID})).Decode(&fresh)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return err
		}
		*doc = fresh
	}
	return storage.E(storage.OpMigrateTake, storage.Unavailable, storage.ErrMoving)
}

// gatherClaims puts the live claims holding a message in transit, and all
// their other messages with every message after the oldest of them, in
// transit too.
func (d *Driver) gatherClaims(ctx context.Context, q storage.QueueRef) error {
	tq := transitRef(q)
	for round := 0; round < gatherRounds; round++ {
		now := d.now()
		held, err := d.findMessages(ctx, append(queueFilter(tq), bson.E{Key: "cl", Value: bson.M{"$ne": ""}}, bson.E{Key: "ce", Value: bson.M{"$gt": now}}),
			options.Find().SetProjection(bson.D{{Key: "cl", Value: 1}}))
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		var cids []string
		for _, m := range held {
			if !seen[m.CL] {
				seen[m.CL] = true
				cids = append(cids, m.CL)
			}
		}
		if len(cids) == 0 {
			return nil
		}
		inClaims := bson.E{Key: "_id", Value: bson.M{"$in": cids}}
		res, err := d.claims.UpdateMany(ctx, append(queueFilter(q), inClaims), bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: tq.Name}}}})
		if err != nil {
			return err
		}
		// The oldest message those claims still hold here, and every
		// message after it: a batch is a suffix of the queue, so what
		// stays here sorts before everything moved (FIFO).
		var oldest msgDoc
		err = d.messages.FindOne(ctx, append(queueFilter(q), bson.E{Key: "cl", Value: bson.M{"$in": cids}}, bson.E{Key: "ce", Value: bson.M{"$gt": now}}, alive(now)),
			options.FindOne().SetSort(byPosition)).Decode(&oldest)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if res.ModifiedCount == 0 {
				return nil
			}
			// Look once more: on FerretDB a claim renewal racing the
			// rename writes the claim back whole, under the old name.
			continue
		}
		if err != nil {
			return err
		}
		rest, err := d.findMessages(ctx, append(queueFilter(q), bson.E{Key: "k", Value: bson.M{"$gte": oldest.K}}, alive(now)), options.Find())
		if err != nil {
			return err
		}
		if err := d.renameAll(ctx, rest, q, tq); err != nil {
			return err
		}
	}
	return nil
}

// transit reads the batch in transit: its messages newest first, and its
// live claims.
func (d *Driver) transit(ctx context.Context, q storage.QueueRef) (storage.Batch, error) {
	tq := queueFilter(transitRef(q))
	docs, err := d.findMessages(ctx, tq, options.Find().SetSort(newestFirst))
	if err != nil {
		return storage.Batch{}, err
	}
	now := d.now()
	cur, err := d.claims.Find(ctx, append(tq, alive(now)))
	if err != nil {
		return storage.Batch{}, err
	}
	var claims []claimDoc
	if err := cur.All(ctx, &claims); err != nil {
		return storage.Batch{}, err
	}
	var b storage.Batch
	live := make(map[string]bool, len(claims))
	for _, c := range claims {
		live[c.ID] = true
		b.Claims = append(b.Claims, storage.MovedClaim{ID: c.ID, TTL: time.Duration(c.TTL) * time.Millisecond,
			Grace: time.Duration(c.Grace) * time.Millisecond, Created: time.UnixMilli(c.C), Expires: time.UnixMilli(c.E)})
	}
	for i := range docs {
		m := docs[i].message(now)
		if m.ClaimID != "" && !live[m.ClaimID] {
			// Its claim was released after the rename (the release
			// deletes the claim's record first): it moves free.
			m.ClaimID, m.ClaimExpires = "", time.Time{}
		}
		b.Messages = append(b.Messages, storage.MovedMessage{Message: m, Seq: docs[i].K})
	}
	return b, nil
}
