package mongo

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"sluice.dev/server/internal/storage"
)

// DocLocks let one writer at a time change a document, on servers that
// need it. MongoDB applies each single-document update atomically, so
// there a writer simply writes. FerretDB applies an update by reading the
// document and writing it back whole (docs/mongodb.md, rows 1 and 2), so of
// two writers changing different fields at once one undoes the other (a
// count lost, a confirmation dropped, a move's state put back); there each
// writer first inserts a lock document whose _id names the document, and
// the unique _id admits one of them. Unlike the message version locks
// (versions.go) they need no version: they suit writers that change a
// document without reading it first. The pool catalog uses them too.
type DocLocks struct {
	coll   *mongo.Collection
	needed bool
}

// docLockLease bounds how long a lock can hold up a document's other
// writers when its holder died before releasing it; docLockWait is how
// long a writer waits for a held one: longer than the lease, so a dead
// holder's lock is taken over rather than failed on.
const (
	docLockLease = 5 * time.Second
	docLockWait  = 6 * time.Second
)

// ErrLockBusy: a document stayed locked by another writer for all of
// docLockWait. The backend is too slow or stuck right now: Unavailable.
var ErrLockBusy = errors.New("another writer held the document for too long")

// NewDocLocks keeps its locks in coll, if the server of db needs them.
func NewDocLocks(ctx context.Context, db *mongo.Database, coll *mongo.Collection) (DocLocks, error) {
	needed, err := updatesNeedLocks(ctx, db)
	return DocLocks{coll: coll, needed: needed}, err
}

// updatesNeedLocks reports whether the server applies updates by reading
// and writing back (FerretDB, which says so in buildInfo).
func updatesNeedLocks(ctx context.Context, db *mongo.Database) (bool, error) {
	var info bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return false, storage.E("mongo.setup", storage.Unavailable, err)
	}
	_, ferret := info["ferretdbVersion"]
	return ferret, nil
}

// Alone runs write, which changes the document that id names, alone
// among the writers that lock id in this collection. fields go into the
// lock document, for its owner's indexes and cleanup.
func (l DocLocks) Alone(ctx context.Context, id string, fields bson.D, write func() error) error {
	if !l.needed {
		return write()
	}
	holder := storage.NewID()
	pause := time.Millisecond
	giveUp := time.Now().Add(docLockWait)
	for {
		now := time.Now()
		doc := append(bson.D{{Key: "_id", Value: id}, {Key: "h", Value: holder}, {Key: "x", Value: now.Add(docLockLease)}}, fields...)
		_, err := l.coll.InsertOne(ctx, doc)
		if err == nil {
			break
		}
		if !IsDuplicateKey(err) {
			return err
		}
		if err := l.takeOver(ctx, id, fields, now); err != nil {
			return err
		}
		if now.After(giveUp) {
			return ErrLockBusy
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 16*time.Millisecond)
	}
	defer func() {
		_, _ = l.coll.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: id}, {Key: "h", Value: holder}})
	}()
	return write()
}

// takeOver removes id's lock if its lease ran out: its holder died. Of
// the writers that find it so at once, the one whose insert of
// "<id>~<holder>" succeeds removes it. Without that, FerretDB's delete (a
// query, then a delete by _id: docs/mongodb.md, row 6) let two of them
// each remove the dead lock and then the lock the other had taken
// meanwhile, and both got in (TestDocLocksTakeOverADeadHolderOnce).
func (l DocLocks) takeOver(ctx context.Context, id string, fields bson.D, now time.Time) error {
	var held struct {
		H string    `bson:"h"`
		X time.Time `bson:"x"`
	}
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&held)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && !held.X.Before(now)) {
		return nil // released meanwhile, or held: try again
	}
	if err != nil {
		return err
	}
	claim := id + "~" + held.H
	_, err = l.coll.InsertOne(ctx, append(bson.D{{Key: "_id", Value: claim}, {Key: "x", Value: now.Add(docLockLease)}}, fields...))
	if IsDuplicateKey(err) {
		// Another writer is taking it over, or died doing so: its claim
		// lapses like a lock.
		_, err = l.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: claim}, {Key: "x", Value: bson.M{"$lt": now}}})
		return err
	}
	if err != nil {
		return err
	}
	// Only this writer deletes the dead lock, and a writer that claims it
	// after the claim is gone finds it gone too.
	_, err = l.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "h", Value: held.H}})
	_, cerr := l.coll.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: claim}})
	return errors.Join(err, cerr)
}

// alone is Alone for a document of the queue (p, q): the lock carries the
// document's name as m, as version locks do, and the queue, so purging the
// queue removes it with the queue's other locks.
func (d *Driver) alone(ctx context.Context, id, p, q string, write func() error) error {
	return d.exclusive.Alone(ctx, id, bson.D{{Key: "m", Value: id}, {Key: "p", Value: p}, {Key: "q", Value: q}}, write)
}
