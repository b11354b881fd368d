package mongo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// lockLease bounds how long a version lock can block a message when the
// process holding it died between taking it and writing the new version.
const lockLease = 30 * time.Second

// lockDoc reserves one version of one message for one writer.
type lockDoc struct {
	ID string    `bson:"_id"` // "<message id>:<version>[:<generation>]"
	M  string    `bson:"m"`
	V  int64     `bson:"v"`
	P  string    `bson:"p"`
	Q  string    `bson:"q"`
	X  time.Time `bson:"x"` // wall-clock end of the lease
}

// acquire reserves doc's current version for this writer. On MongoDB the
// conditional update alone decides, so it always succeeds. On FerretDB the
// unique _id decides: of all writers that read version v, the one whose
// insert of "<id>:<v>" succeeds writes v+1. A lock whose lease ran out
// (its holder died) is superseded by the next generation.
func (d *Driver) acquire(ctx context.Context, doc *msgDoc) (bool, error) {
	return d.acquireVersion(ctx, doc.ID, doc.V, doc.P, doc.Q)
}

// acquireVersion is acquire for any versioned document (messages, and
// deliveries under the id "dl:<delivery id>").
func (d *Driver) acquireVersion(ctx context.Context, docID string, v int64, p, q string) (bool, error) {
	if !d.lockVersions {
		return true, nil
	}
	return d.takeLock(ctx, lockDoc{ID: docID + ":" + strconv.FormatInt(v, 10), M: docID, V: v, P: p, Q: q})
}

// takeLock inserts the lock l (its ID names the version), or a later
// generation of it when the holder's lease ran out.
func (d *Driver) takeLock(ctx context.Context, l lockDoc) (bool, error) {
	base := l.ID
	for g := 0; g < 4; g++ {
		id := base
		if g > 0 {
			id += ":" + strconv.Itoa(g)
		}
		l.ID, l.X = id, time.Now().Add(lockLease)
		_, err := d.locks.InsertOne(ctx, l)
		if err == nil {
			return true, nil
		}
		if !IsDuplicateKey(err) {
			return false, err
		}
		var held lockDoc
		err = d.locks.FindOne(ctx, bson.M{"_id": id}).Decode(&held)
		if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && held.X.After(time.Now())) {
			return false, nil // cleaned up (the version moved on) or held
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// writeVersion sets fields on doc if it is still at the version it was read
// at, moving it to the next version; false means another writer got there
// first (or the message is gone).
func (d *Driver) writeVersion(ctx context.Context, doc *msgDoc, set bson.D) (bool, error) {
	ok, err := d.acquire(ctx, doc)
	if !ok || err != nil {
		return false, err
	}
	set = append(set, bson.E{Key: "v", Value: doc.V + 1})
	res, err := d.messages.UpdateOne(ctx, bson.D{{Key: "_id", Value: doc.ID}, {Key: "v", Value: doc.V}}, bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return false, err
	}
	if d.lockVersions {
		// Locks of older versions can no longer matter: anyone taking one
		// now reads the document afterwards and finds a newer version.
		_, _ = d.locks.DeleteMany(ctx, bson.D{{Key: "m", Value: doc.ID}, {Key: "v", Value: bson.M{"$lt": doc.V}}})
	}
	return res.MatchedCount == 1, nil
}

// deleteVersion deletes doc if it is still at the version it was read at.
func (d *Driver) deleteVersion(ctx context.Context, doc *msgDoc) (bool, error) {
	ok, err := d.acquire(ctx, doc)
	if !ok || err != nil {
		return false, err
	}
	res, err := d.messages.DeleteOne(ctx, bson.D{{Key: "_id", Value: doc.ID}, {Key: "v", Value: doc.V}})
	if err != nil {
		return false, err
	}
	return res.DeletedCount == 1, d.dropLocks(ctx, []string{doc.ID})
}

// dropLocks removes the locks of deleted messages.
func (d *Driver) dropLocks(ctx context.Context, ids []string) error {
	if !d.lockVersions {
		return nil
	}
	_, err := d.locks.DeleteMany(ctx, bson.M{"m": bson.M{"$in": ids}})
	return err
}

// outcome is what take did with one candidate of eachFree.
type outcome int

const (
	lost     outcome = iota // another writer changed it first (or it is to be skipped)
	took                    // taken: counts towards the limit
	disposed                // dealt with without taking it (dead-lettered)
)

// stalledRounds bounds the rounds in which every candidate was lost to
// concurrent writers; maxRounds bounds one call however much it disposes of
// (the next call goes on from there).
const (
	stalledRounds = 8
	maxRounds     = 1000
)

// eachFree offers the queue's oldest free, visible, live messages to take
// until it has taken limit of them or none is left. Candidates lost to
// concurrent writers are skipped and replaced by the next ones; candidates
// disposed of (dead-lettered) make room for the next ones without counting.
func (d *Driver) eachFree(ctx context.Context, q storage.QueueRef, limit int, take func(doc *msgDoc, now int64) (outcome, error)) error {
	taken, stalled := 0, 0
	for round := 0; round < maxRounds && stalled < stalledRounds && taken < limit; round++ {
		now := d.now()
		f := append(queueFilter(q), alive(now), bson.E{Key: "d", Value: bson.M{"$lte": now}}, free(now))
		docs, err := d.findMessages(ctx, f, options.Find().SetSort(byPosition).SetLimit(int64(limit-taken)))
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return nil
		}
		progress := false
		for i := range docs {
			o, err := take(&docs[i], now)
			if err != nil {
				return err
			}
			switch o {
			case took:
				taken++
				progress = true
			case disposed:
				progress = true
			}
		}
		if !progress {
			stalled++
		}
	}
	return nil
}

// heldWait bounds how long eachHeld waits for another writer of a
// message to finish before it gives up with Unavailable (the caller's
// write, a renew or a release, is idempotent: a retry completes it).
const heldWait = 2 * time.Second

// eachHeld applies change to every live message held by claim cid,
// re-reading a message whose version moved under it. A version that has
// not moved is held by another writer that has not written yet (FerretDB's
// version locks): it waits for that write rather than try again at once.
// It never gives up silently: a release that skipped a message renewed
// meanwhile left it held by a claim that no longer existed
// (Claims/EndsRace).
func (d *Driver) eachHeld(ctx context.Context, q storage.QueueRef, cid string, change func(doc *msgDoc, now int64) bson.D) error {
	now := d.now()
	held := append(queueFilter(q), bson.E{Key: "cl", Value: cid}, bson.E{Key: "ce", Value: bson.M{"$gt": now}}, alive(now))
	docs, err := d.findMessages(ctx, held, options.Find().SetSort(byPosition))
	if err != nil {
		return err
	}
	for i := range docs {
		doc := &docs[i]
		giveUp, pause := time.Now().Add(heldWait), time.Millisecond
		for {
			ok, err := d.writeVersion(ctx, doc, change(doc, now))
			if err != nil {
				return err
			}
			if ok {
				break
			}
			var fresh msgDoc
			err = d.messages.FindOne(ctx, append(held, bson.E{Key: "_id", Value: doc.ID})).Decode(&fresh)
			if errors.Is(err, mongo.ErrNoDocuments) {
				break // deleted, expired or taken over: no longer ours
			}
			if err != nil {
				return err
			}
			if fresh.V == doc.V {
				if time.Now().After(giveUp) {
					return fmt.Errorf("message %s: %w", doc.ID, ErrLockBusy)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(pause):
				}
				pause = min(2*pause, 16*time.Millisecond)
			}
			*doc = fresh
		}
	}
	return nil
}
