package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

type queueStore struct{ d *Driver }

func queueKey(q storage.QueueRef) bson.D {
	return bson.D{{Key: "p", Value: q.Project}, {Key: "n", Value: q.Name}}
}

// Create inserts the queue document; the unique (p, n) index makes exactly
// one of several concurrent creators see created == true.
func (s queueStore) Create(ctx context.Context, q storage.QueueRef, meta storage.Metadata) (bool, error) {
	const op = storage.OpQueueCreate
	b, err := json.Marshal(meta)
	if err != nil {
		return false, storage.E(op, storage.Invalid, err)
	}
	if meta == nil {
		b = []byte("{}")
	}
	doc := queueDoc{P: q.Project, N: q.Name, M: string(b)}
	_, err = s.d.queues.InsertOne(ctx, doc)
	if IsDuplicateKey(err) {
		if dropped, err := s.d.dropLapsed(ctx, q); err != nil || !dropped {
			return false, firstErr(wrap(op, err), s.d.tombstone(ctx, op, q))
		}
		_, err = s.d.queues.InsertOne(ctx, doc)
		if IsDuplicateKey(err) {
			return false, nil
		}
	}
	return err == nil, wrap(op, err)
}

// ensure creates the queue with empty metadata if it does not exist yet, as
// a post or a metadata write does.
func (s queueStore) ensure(ctx context.Context, q storage.QueueRef) error {
	_, err := s.d.queues.InsertOne(ctx, queueDoc{P: q.Project, N: q.Name, M: "{}"})
	if err == nil || IsDuplicateKey(err) {
		return nil
	}
	return err
}

// ensureOpen is ensure for a post: it reads the queue document first (one
// round trip, as the insert it replaces), so a sealed queue answers
// Moved(target) and a queue moved here numbers its messages above the
// floor, at no extra cost.
func (s queueStore) ensureOpen(ctx context.Context, op string, q storage.QueueRef) (floor int64, err error) {
	for attempt := 0; attempt < 3; attempt++ {
		var doc queueDoc
		err := s.d.queues.FindOne(ctx, queueKey(q), projectMove).Decode(&doc)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			if err := s.ensure(ctx, q); err != nil {
				return 0, wrap(op, err)
			}
			continue // read what was created (perhaps a seal, by a racer)
		case err != nil:
			return 0, wrap(op, err)
		case doc.Move.TB > 0 && !doc.tombstoned(s.d.now()):
			// The tombstone of a finished move ran out: the queue is
			// new here.
			if _, err := s.d.queues.DeleteOne(ctx, append(queueKey(q), bson.E{Key: "tb", Value: doc.Move.TB})); err != nil {
				return 0, wrap(op, err)
			}
			continue
		case doc.Move.MV != "":
			return 0, storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
		}
		return doc.Move.KF, nil
	}
	return 0, storage.E(op, storage.Unavailable, errors.New("queue changed while posting; try again"))
}

// Exists reports whether the queue document exists.
func (s queueStore) Exists(ctx context.Context, q storage.QueueRef) (bool, error) {
	const op = storage.OpQueueExists
	var doc queueDoc
	err := s.d.queues.FindOne(ctx, queueKey(q), projectMove).Decode(&doc)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, nil
	case err != nil:
		return false, wrap(op, err)
	case doc.tombstoned(s.d.now()):
		return false, storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
	}
	return doc.Move.TB == 0, nil
}

// GetMetadata returns the stored metadata, or an empty one for a queue that
// does not exist.
func (s queueStore) GetMetadata(ctx context.Context, q storage.QueueRef) (storage.Metadata, error) {
	const op = storage.OpQueueGetMetadata
	var doc queueDoc
	err := s.d.queues.FindOne(ctx, queueKey(q)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return storage.Metadata{}, nil
	}
	if err != nil {
		return nil, wrap(op, err)
	}
	if doc.tombstoned(s.d.now()) {
		return nil, storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
	}
	meta, err := decodeMeta(doc.M)
	if err != nil {
		return nil, storage.E(op, storage.Internal, err)
	}
	return meta, nil
}

// SetMetadata replaces the metadata, creating the queue if needed.
func (s queueStore) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	const op = storage.OpQueueSetMetadata
	if meta == nil {
		meta = storage.Metadata{}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return storage.E(op, storage.Invalid, err)
	}
	// On FerretDB an UpdateMetadata that read the previous version would
	// write its result over this one (docs/mongodb.md, row 1): an existing
	// queue's metadata is replaced through the same version lock. Only a
	// queue that does not exist yet is created by the upsert below, and a
	// lapsed tombstone is dropped first, as the upsert does.
	replace := func(storage.Metadata) (storage.Metadata, error) { return meta, nil }
	if s.d.lockVersions {
		if _, err := s.d.dropLapsed(ctx, q); err != nil {
			return wrap(op, err)
		}
		if _, err := s.swapMetadata(ctx, op, q, replace); !storage.Is(err, storage.NotFound) {
			return err
		}
	}
	// The version moves too, so an UpdateMetadata that read the old
	// metadata cannot write over this one.
	// A sealed queue's metadata moves with it (Seal read it): the write
	// matches only a queue that is not moving, and the upsert of a moving
	// one fails on the unique name.
	open := append(queueKey(q), bson.E{Key: "mv", Value: bson.M{"$exists": false}})
	upd := bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: string(b)}}}, {Key: "$inc", Value: bson.D{{Key: "v", Value: int64(1)}}}}
	_, err = s.d.queues.UpdateOne(ctx, open, upd, options.UpdateOne().SetUpsert(true))
	if IsDuplicateKey(err) { // lost an upsert race, or the queue is moving
		if dropped, derr := s.d.dropLapsed(ctx, q); derr != nil {
			return wrap(op, derr)
		} else if dropped {
			_, err = s.d.queues.UpdateOne(ctx, open, upd, options.UpdateOne().SetUpsert(true))
			return wrap(op, err)
		}
		if s.d.lockVersions { // created meanwhile
			_, err := s.swapMetadata(ctx, op, q, replace)
			return err
		}
		var res *mongo.UpdateResult
		if res, err = s.d.queues.UpdateOne(ctx, open, upd); err == nil && res.MatchedCount == 0 {
			return s.sealedAnswer(ctx, op, q)
		}
	}
	return wrap(op, err)
}

// sealedAnswer is what a write refused on a moving queue answers: Moved
// while it is sealed or a tombstone, a retry when it changed meanwhile.
func (s queueStore) sealedAnswer(ctx context.Context, op string, q storage.QueueRef) error {
	doc, found, err := s.d.queueDoc(ctx, q)
	switch {
	case err != nil:
		return wrap(op, err)
	case found && doc.Move.MV != "" && (doc.Move.TB == 0 || doc.tombstoned(s.d.now())):
		return storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
	}
	return storage.E(op, storage.Unavailable, errors.New("queue changed meanwhile; try again"))
}

// Delete removes the queue, then its messages, claims and locks, and what
// a move left of it; a queue that moved away answers Moved.
func (s queueStore) Delete(ctx context.Context, q storage.QueueRef) error {
	const op = storage.OpQueueDelete
	if err := s.d.tombstone(ctx, op, q); err != nil {
		return err
	}
	if _, err := s.d.queues.DeleteOne(ctx, queueKey(q)); err != nil {
		return wrap(op, err)
	}
	if err := s.d.dropNotifications(ctx, q); err != nil {
		return wrap(op, err)
	}
	for _, r := range []storage.QueueRef{q, transitRef(q), movedRef(q)} {
		if err := s.purge(ctx, r); err != nil {
			return wrap(op, err)
		}
	}
	_, err := s.d.imported.DeleteMany(ctx, queueFilter(q))
	return wrap(op, err)
}

// Purge removes the queue's messages and claims.
func (s queueStore) Purge(ctx context.Context, q storage.QueueRef) error {
	const op = storage.OpQueuePurge
	if err := s.d.tombstone(ctx, op, q); err != nil {
		return err
	}
	return wrap(op, s.purge(ctx, q))
}

func (s queueStore) purge(ctx context.Context, q storage.QueueRef) error {
	for _, c := range []*mongo.Collection{s.d.messages, s.d.claims, s.d.locks} {
		if _, err := c.DeleteMany(ctx, queueFilter(q)); err != nil {
			return err
		}
	}
	return nil
}

// List pages the project's queues by name.
func (s queueStore) List(ctx context.Context, project string, o storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	const op = storage.OpQueueList
	// Tombstones of moved queues are not queues here.
	f := bson.D{{Key: "p", Value: project}, {Key: "tb", Value: bson.M{"$exists": false}}}
	if o.Marker != "" || o.Name != "" {
		n := bson.D{}
		if o.Marker != "" {
			n = append(n, bson.E{Key: "$gt", Value: o.Marker})
		}
		if o.Name != "" {
			n = append(n, bson.E{Key: "$regex", Value: regexp.QuoteMeta(o.Name)})
		}
		f = append(f, bson.E{Key: "n", Value: n})
	}
	fo := options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetLimit(int64(o.Limit))
	cur, err := s.d.queues.Find(ctx, f, fo)
	if err != nil {
		return nil, wrap(op, err)
	}
	var docs []queueDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(op, err)
	}
	out := make([]storage.QueueInfo, 0, len(docs))
	for _, doc := range docs {
		qi := storage.QueueInfo{Name: doc.N}
		if o.Detailed {
			if qi.Metadata, err = decodeMeta(doc.M); err != nil {
				return nil, storage.E(op, storage.Internal, err)
			}
		}
		out = append(out, qi)
	}
	return out, nil
}

// Stats counts live messages: total, claimed (held by a live claim), and
// free as the difference; oldest and newest by position.
func (s queueStore) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	const op = storage.OpQueueStats
	now := s.d.now()
	var st storage.QueueStats
	// A batch in transit counts, as listings show it: a queue's depth does
	// not dip while it moves.
	live := append(listedFilter(q), alive(now))
	total, err := s.d.messages.CountDocuments(ctx, live)
	if err != nil {
		return st, wrap(op, err)
	}
	if total == 0 {
		return st, s.d.tombstone(ctx, op, q)
	}
	claimed, err := s.d.messages.CountDocuments(ctx, append(listedFilter(q), alive(now),
		bson.E{Key: "cl", Value: bson.M{"$ne": ""}}, bson.E{Key: "ce", Value: bson.M{"$gt": now}}))
	if err != nil {
		return st, wrap(op, err)
	}
	st.Total, st.Claimed, st.Free = int(total), int(claimed), int(total-claimed)
	for _, end := range []struct {
		dir int
		to  **storage.Message
	}{{1, &st.Oldest}, {-1, &st.Newest}} {
		var doc msgDoc
		err := s.d.messages.FindOne(ctx, live, options.FindOne().SetSort(bson.D{{Key: "k", Value: end.dir}, {Key: "_id", Value: end.dir}})).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue // expired between the count and now
		}
		if err != nil {
			return st, wrap(op, err)
		}
		m := doc.message(now)
		*end.to = &m
	}
	return st, nil
}
