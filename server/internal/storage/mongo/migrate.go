package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// Moving a queue (storage.MigrationStore, docs/pooling.md "Moving a queue").
//
// The source records its part in the queue document: the seal (mv, the
// target) and, once Finish ran, a tombstone (tb). Post reads that document
// anyway to create the queue on first use, so it sees the seal without an
// extra round trip.
//
// A batch in transit is the queue's messages and claims renamed to its
// transit name. Renaming a message is one version change of its document,
// the same compare-and-swap a claim or a pop makes, so a message is either
// claimed here or in transit, never both, and every query of the queue stops
// seeing it with no new filter. Neither MongoDB without a replica set nor
// FerretDB has multi-document transactions, so Take is a series of such
// single-document steps; whatever carries the transit name is the batch, so
// a mover that crashed part-way finds it again (InTransit) and completes it.

type migrationStore struct{ d *Driver }

// StorageID inserts the database's id if it has none and returns the id it
// holds. Of two first callers at once, the one whose upsert loses to the
// unique _id reads the winner's.
func (m migrationStore) StorageID(ctx context.Context) (string, error) {
	const op = storage.OpMigrateStorageID
	coll := m.d.db.Collection("storage")
	key := bson.D{{Key: "_id", Value: "id"}}
	_, err := coll.UpdateOne(ctx, key, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "v", Value: storage.NewID()}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil && !IsDuplicateKey(err) {
		return "", wrap(op, err)
	}
	var doc struct {
		V string `bson:"v"`
	}
	if err := coll.FindOne(ctx, key).Decode(&doc); err != nil {
		return "", wrap(op, err)
	}
	return doc.V, nil
}

var _ storage.Migrator = (*Driver)(nil)

// Migrations returns the driver's part in moving a queue.
func (d *Driver) Migrations() storage.MigrationStore { return migrationStore{d} }

// transitRef names where a queue's batch in transit is kept: '#' is not
// allowed in queue names, so no real queue has this name.
func transitRef(q storage.QueueRef) storage.QueueRef {
	return storage.QueueRef{Project: q.Project, Name: q.Name + "#transit"}
}

// movedRef names where the source keeps the messages and claims it
// settled, without their bodies, so a call naming one is sent to the target
// while a deleted one is simply not found. Finish removes them.
func movedRef(q storage.QueueRef) storage.QueueRef {
	return storage.QueueRef{Project: q.Project, Name: q.Name + "#moved"}
}

var (
	errNotSealed = errors.New("queue is not sealed for a move")
	errTaken     = errors.New("a batch was already taken: the move can only go forward")
)

// queueDoc reads the queue document; found is false when there is none.
func (d *Driver) queueDoc(ctx context.Context, q storage.QueueRef) (queueDoc, bool, error) {
	var doc queueDoc
	err := d.queues.FindOne(ctx, queueKey(q)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return doc, false, nil
	}
	return doc, err == nil, err
}

// sealedDoc reads the queue document of a source in a move: Conflict when
// the queue is not sealed, finished true once it carries a tombstone.
func (d *Driver) sealedDoc(ctx context.Context, op string, q storage.QueueRef) (doc queueDoc, finished bool, err error) {
	doc, found, err := d.queueDoc(ctx, q)
	switch {
	case err != nil:
		return doc, false, wrap(op, err)
	case !found || doc.Move.MV == "":
		return doc, false, storage.E(op, storage.Conflict, errNotSealed)
	}
	return doc, doc.Move.TB > 0, nil
}

// dropLapsed removes q's tombstone when it has run out, so the name is free
// here again; it reports whether there was one.
func (d *Driver) dropLapsed(ctx context.Context, q storage.QueueRef) (bool, error) {
	res, err := d.queues.DeleteOne(ctx, append(queueKey(q), bson.E{Key: "tb", Value: bson.M{"$gt": int64(0), "$lte": d.now()}}))
	if err != nil {
		return false, err
	}
	return res.DeletedCount > 0, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// movingAway reports that q is sealed here or a live tombstone.
func (d *Driver) movingAway(ctx context.Context, q storage.QueueRef) (bool, error) {
	var doc queueDoc
	err := d.queues.FindOne(ctx, queueKey(q), projectMove).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return doc.Move.MV != "" && (doc.Move.TB == 0 || doc.tombstoned(d.now())), nil
}

// tombstoned reports a live tombstone left by Finish.
func (doc *queueDoc) tombstoned(now int64) bool { return doc.Move.TB > now }

// Seal records the target on the queue document, with the queue's highest
// position so far. It creates the document when the queue does not exist,
// so a post through a stale placement cannot recreate it here.
func (s migrationStore) Seal(ctx context.Context, q storage.QueueRef, target string) (storage.Sealed, error) {
	const op = storage.OpMigrateSeal
	d := s.d
	if target == "" {
		return storage.Sealed{}, storage.E(op, storage.Invalid, errors.New("no target"))
	}
	for attempt := 0; attempt < 5; attempt++ {
		doc, found, err := d.queueDoc(ctx, q)
		if err != nil {
			return storage.Sealed{}, wrap(op, err)
		}
		if found && doc.Move.MV != "" && !(doc.Move.TB > 0 && !doc.tombstoned(d.now())) {
			if doc.Move.MV != target {
				return storage.Sealed{}, storage.E(op, storage.Conflict, fmt.Errorf("queue is already moving to %s", doc.Move.MV))
			}
			return d.sealed(&doc)
		}
		if found && doc.Move.TB > 0 { // an expired tombstone: the queue is gone
			_, err = d.queues.DeleteOne(ctx, append(queueKey(q), bson.E{Key: "tb", Value: doc.Move.TB}))
			if err != nil {
				return storage.Sealed{}, wrap(op, err)
			}
			continue
		}
		// Posts that read the document before the seal take positions from
		// the clock up to now; the sequence covers them too. A queue with
		// no document has no post under way: a post creates the document
		// and reads it again, so it sees the seal.
		var seq int64
		if found {
			seq = d.clock.Now().UnixMicro()
		}
		var last msgDoc
		err = d.messages.FindOne(ctx, queueFilter(q), findNewest).Decode(&last)
		if err == nil {
			seq = max(seq, last.K)
		} else if !errors.Is(err, mongo.ErrNoDocuments) {
			return storage.Sealed{}, wrap(op, err)
		}
		seal := moveState{MV: target, SS: seq, SE: found}
		if !found {
			_, err = d.queues.InsertOne(ctx, queueDoc{P: q.Project, N: q.Name, M: "{}", Move: seal})
			if IsDuplicateKey(err) {
				continue // created meanwhile: seal what is there
			}
			if err != nil {
				return storage.Sealed{}, wrap(op, err)
			}
			return storage.Sealed{Seq: seq, Metadata: storage.Metadata{}}, nil
		}
		res, err := d.queues.UpdateOne(ctx, append(queueKey(q), bson.E{Key: "mv", Value: bson.M{"$exists": false}}),
			bson.D{{Key: "$set", Value: bson.D{{Key: "mv", Value: target}, {Key: "ss", Value: seq}, {Key: "se", Value: true}}}})
		if err != nil {
			return storage.Sealed{}, wrap(op, err)
		}
		if res.MatchedCount == 0 {
			continue // sealed or deleted meanwhile: read again
		}
		// FerretDB writes an update back as a whole document, so a
		// metadata write that read the queue before the seal can undo
		// it: read again until the seal is seen.
	}
	return storage.Sealed{}, storage.E(op, storage.Conflict, errors.New("queue changed while sealing; try again"))
}

func (d *Driver) sealed(doc *queueDoc) (storage.Sealed, error) {
	meta, err := decodeMeta(doc.M)
	if err != nil {
		return storage.Sealed{}, storage.E(storage.OpMigrateSeal, storage.Internal, err)
	}
	return storage.Sealed{Seq: doc.Move.SS, Metadata: meta, Exists: doc.Move.SE}, nil
}

// Unseal removes the seal while no batch was taken. A queue document the
// seal created is removed with it.
func (s migrationStore) Unseal(ctx context.Context, q storage.QueueRef) error {
	const op = storage.OpMigrateUnseal
	d := s.d
	doc, found, err := d.queueDoc(ctx, q)
	switch {
	case err != nil:
		return wrap(op, err)
	case !found || doc.Move.MV == "":
		return nil
	case doc.Move.TK || doc.Move.TB > 0:
		return storage.E(op, storage.Conflict, errTaken)
	}
	unsealed := append(queueKey(q), bson.E{Key: "tk", Value: bson.M{"$exists": false}})
	if !doc.Move.SE {
		_, err = d.queues.DeleteOne(ctx, unsealed)
		return wrap(op, err)
	}
	res, err := d.queues.UpdateOne(ctx, unsealed, bson.D{{Key: "$unset", Value: bson.D{
		{Key: "mv", Value: ""}, {Key: "ss", Value: ""}, {Key: "se", Value: ""}}}})
	if err == nil && res.MatchedCount == 0 {
		return storage.E(op, storage.Conflict, errTaken)
	}
	return wrap(op, err)
}

// Finish removes the queue's leftovers and turns its document into a
// tombstone. It refuses while messages remain or a batch is in transit:
// removing them would lose them.
func (s migrationStore) Finish(ctx context.Context, q storage.QueueRef, ttl time.Duration) error {
	const op = storage.OpMigrateFinish
	d := s.d
	_, finished, err := d.sealedDoc(ctx, op, q)
	if err != nil || finished {
		return err // finished before: nothing to do
	}
	now := d.now()
	for _, r := range []bson.D{append(queueFilter(q), alive(now)), queueFilter(transitRef(q))} {
		n, err := d.messages.CountDocuments(ctx, r, options.Count().SetLimit(1))
		if err != nil {
			return wrap(op, err)
		}
		if n > 0 {
			return storage.E(op, storage.Conflict, errors.New("messages are left to move"))
		}
	}
	_, err = d.queues.UpdateOne(ctx, queueKey(q), bson.D{
		{Key: "$set", Value: bson.D{{Key: "tb", Value: now + ms(ttl)}, {Key: "m", Value: "{}"}}},
		{Key: "$unset", Value: bson.D{{Key: "tr", Value: ""}}}})
	if err != nil {
		return wrap(op, err)
	}
	for _, r := range []storage.QueueRef{q, transitRef(q), movedRef(q)} {
		if err := (queueStore{d}).purge(ctx, r); err != nil {
			return wrap(op, err)
		}
	}
	// Subscriptions moved before the switch; no message comes here to
	// notify about any more.
	return wrap(op, d.dropNotifications(ctx, q))
}

// where is what a source knows of ids a call did not find here.
type where int

const (
	notMoved  where = iota // a plain miss (or the queue is not moving)
	inTransit              // one of them is in a batch in transit: retry
	settled                // one of them was moved: ask the target
	finished               // the queue moved away (tombstone): ask the target
)

// whereAre looks up msgIDs and claimIDs (either may be empty) in the
// queue's transit and moved records. It costs a read, so calls make it only
// on a miss.
func (d *Driver) whereAre(ctx context.Context, q storage.QueueRef, msgIDs, claimIDs []string) (where, string, error) {
	doc, found, err := d.queueDoc(ctx, q)
	if err != nil || !found || doc.Move.MV == "" {
		return notMoved, "", err
	}
	if doc.Move.TB > 0 {
		if doc.tombstoned(d.now()) {
			return finished, doc.Move.MV, nil
		}
		return notMoved, "", nil
	}
	for _, r := range []struct {
		ref  storage.QueueRef
		on   bool
		then where
	}{{transitRef(q), doc.Move.TR, inTransit}, {movedRef(q), doc.Move.TK, settled}} {
		if !r.on {
			continue
		}
		// A claim is away when its record is, or any message it holds:
		// Take renames the messages first, and a released claim's record
		// is gone while its messages still name it.
		for _, c := range []struct {
			coll *mongo.Collection
			key  string
			ids  []string
		}{{d.messages, "_id", msgIDs}, {d.claims, "_id", claimIDs}, {d.messages, "cl", claimIDs}} {
			if len(c.ids) == 0 {
				continue
			}
			n, err := c.coll.CountDocuments(ctx, append(queueFilter(r.ref), bson.E{Key: c.key, Value: bson.M{"$in": c.ids}}), options.Count().SetLimit(1))
			if err != nil {
				return notMoved, "", err
			}
			if n > 0 {
				return r.then, doc.Move.MV, nil
			}
		}
	}
	return notMoved, "", nil
}

// answer turns a where into the error a call gives: Moving, Moved or none.
func (w where) answer(op, target string) error {
	switch w {
	case inTransit:
		return storage.E(op, storage.Unavailable, storage.ErrMoving)
	case settled, finished:
		return storage.E(op, storage.Conflict, storage.Moved{Target: target})
	}
	return nil
}

// moveRedirect is what a call that found nothing here for msgIDs /
// claimIDs answers: Moving, Moved, or nil for a plain miss.
func (d *Driver) moveRedirect(ctx context.Context, op string, q storage.QueueRef, msgIDs, claimIDs []string) error {
	w, target, err := d.whereAre(ctx, q, msgIDs, claimIDs)
	if err != nil {
		return wrap(op, err)
	}
	return w.answer(op, target)
}

// tombstone answers Moved when Finish left a live tombstone for q: calls
// whose answer would be "empty" ask it, so a server with a stale placement
// is sent on instead of reading an empty queue.
func (d *Driver) tombstone(ctx context.Context, op string, q storage.QueueRef) error {
	return d.moveRedirect(ctx, op, q, nil, nil)
}

// claimable answers Moving while a batch is in transit (a claim or pop must
// not skip past it) and Moved after Finish; it is the one extra read a
// claim makes.
func (d *Driver) claimable(ctx context.Context, op string, q storage.QueueRef) error {
	var doc queueDoc
	err := d.queues.FindOne(ctx, queueKey(q), projectMove).Decode(&doc)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil
	case err != nil:
		return wrap(op, err)
	case doc.tombstoned(d.now()):
		return storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
	case doc.Move.TR:
		return storage.E(op, storage.Unavailable, storage.ErrMoving)
	}
	return nil
}

// emptyStands is the check a claim or pop makes before answering that it
// found nothing free: claimable ran before the search, and a Take that
// began in between hid the messages it put in transit from it. Then the
// answer is Moving, as it would have been a moment later; an empty one
// would send the caller on to the target, past the batch.
func (d *Driver) emptyStands(ctx context.Context, op string, q storage.QueueRef) error {
	return d.claimable(ctx, op, q)
}

var projectMove = options.FindOne().SetProjection(bson.D{{Key: "mv", Value: 1}, {Key: "tr", Value: 1}, {Key: "tb", Value: 1}, {Key: "kf", Value: 1}})

var findNewest = options.FindOne().SetSort(bson.D{{Key: "k", Value: -1}, {Key: "_id", Value: -1}})

// jsonMeta encodes metadata as the queue document keeps it.
func jsonMeta(op string, meta storage.Metadata) (string, error) {
	if meta == nil {
		return "{}", nil
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", storage.E(op, storage.Invalid, err)
	}
	return string(b), nil
}
