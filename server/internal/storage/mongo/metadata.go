package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"sluice.dev/server/internal/storage"
)

// UpdateMetadata is an optimistic read-modify-write on the queue document's
// version: the write matches only while the document is still at the
// version (and metadata text) the update saw, and moves it to the next
// version. On FerretDB, which does not apply a conditional update
// atomically, a lock on the version decides first, as for messages.
func (s queueStore) UpdateMetadata(ctx context.Context, q storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	return s.swapMetadata(ctx, storage.OpQueueUpdateMetadata, q, update)
}

// swapMetadata is UpdateMetadata, its errors named op.
func (s queueStore) swapMetadata(ctx context.Context, op string, q storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	d := s.d
	var ver int64
	return storage.SwapMetadata(ctx, op, storage.MetadataCAS{
		Load: func(ctx context.Context) (string, bool, error) {
			var doc queueDoc
			err := d.queues.FindOne(ctx, queueKey(q)).Decode(&doc)
			if errors.Is(err, mongo.ErrNoDocuments) {
				return "", false, nil
			}
			if err == nil && doc.Move.MV != "" && (doc.Move.TB == 0 || doc.tombstoned(d.now())) {
				// Metadata moves with the queue (Seal read it).
				return "", false, storage.E(op, storage.Conflict, storage.Moved{Target: doc.Move.MV})
			}
			ver = doc.V
			return doc.M, err == nil, wrap(op, err)
		},
		Swap: func(ctx context.Context, prev, next string) (bool, bool, error) {
			lockID := metaLockID(q)
			if d.lockVersions {
				ok, err := d.takeLock(ctx, lockDoc{ID: lockID + ":" + strconv.FormatInt(ver, 10), M: lockID, V: ver, P: q.Project, Q: q.Name})
				if !ok || err != nil {
					return false, true, wrap(op, err)
				}
			}
			// Documents written before versions existed have no v: version 0.
			var atVer any = ver
			if ver == 0 {
				atVer = bson.M{"$in": bson.A{int64(0), nil}}
			}
			res, err := d.queues.UpdateOne(ctx, append(queueKey(q), bson.E{Key: "v", Value: atVer}, bson.E{Key: "m", Value: prev}),
				bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: next}, {Key: "v", Value: ver + 1}}}})
			if err != nil {
				return false, false, wrap(op, err)
			}
			if d.lockVersions {
				_, _ = d.locks.DeleteMany(ctx, bson.D{{Key: "m", Value: lockID}, {Key: "v", Value: bson.M{"$lt": ver}}})
			}
			// Not matched: changed meanwhile, or deleted (the next read tells).
			return res.MatchedCount == 1, true, nil
		},
		Decode: func(raw string) (storage.Metadata, error) {
			m, err := decodeMeta(raw)
			if err != nil {
				return nil, storage.E(op, storage.Internal, err)
			}
			return m, nil
		},
		Encode: func(m storage.Metadata) (string, error) {
			b, err := json.Marshal(m)
			if err != nil {
				return "", storage.E(op, storage.Invalid, err)
			}
			return string(b), nil
		},
	}, update)
}

// metaLockID names the version locks of a queue's metadata; the length
// prefix keeps it apart from message ids and other queues' names.
func metaLockID(q storage.QueueRef) string {
	return "meta:" + strconv.Itoa(len(q.Project)) + ":" + q.Project + q.Name
}
