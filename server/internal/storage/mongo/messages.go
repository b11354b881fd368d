package mongo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

// cleanupEvery paces the removal of expired documents on servers without TTL
// indexes: one post in this many also deletes the queue's expired messages.
const cleanupEvery = 64

// Post inserts the batch with one ordered insertMany. MongoDB has no
// multi-document atomicity without transactions, so when the insert fails
// part-way the messages already written are deleted again before the error
// is returned.
func (s messageStore) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	const op = storage.OpMessagePost
	floor, err := queueStore{s.d}.ensureOpen(ctx, op, q)
	if err != nil {
		return nil, err
	}
	now := s.d.now()
	key := s.d.nextKeysAbove(len(msgs), floor)
	ids := make([]string, len(msgs))
	docs := make([]any, len(msgs))
	for i, m := range msgs {
		ids[i] = uuid.NewString()
		e := now + ms(m.TTL)
		d := &msgDoc{ID: ids[i], P: q.Project, Q: q.Name, K: key + int64(i), B: string(m.Body),
			T: ms(m.TTL), C: now, E: e, U: clientID, X: s.d.wallExpiry(e)}
		if m.Delay > 0 {
			d.D = now + ms(m.Delay)
		}
		docs[i] = d
	}
	dls, err := s.d.recordDeliveries(ctx, q, ids, docs, now)
	if err != nil {
		return nil, wrap(op, err)
	}
	if _, err := s.d.messages.InsertMany(ctx, docs); err != nil {
		// Undo the part that was written; best effort, the error stands.
		_, _ = s.d.messages.DeleteMany(context.WithoutCancel(ctx), bson.M{"_id": bson.M{"$in": ids}})
		if len(dls) > 0 {
			_, _ = s.d.deliveries.DeleteMany(context.WithoutCancel(ctx), bson.M{"_id": bson.M{"$in": dls}})
		}
		return nil, wrap(op, err)
	}
	if !s.d.ttlIndexes && s.d.posts.Add(1)%cleanupEvery == 0 {
		s.d.removeExpired(ctx, q, now)
	}
	return ids, nil
}

// removeExpired deletes the queue's expired messages and claims, for servers
// that have no TTL index to do it. Reads never depend on it.
func (d *Driver) removeExpired(ctx context.Context, q storage.QueueRef, now int64) {
	expired := append(queueFilter(q), bson.E{Key: "e", Value: bson.M{"$lte": now}})
	_, _ = d.messages.DeleteMany(ctx, expired)
	_, _ = d.claims.DeleteMany(ctx, expired)
}

// Markers are "<position>.<id>": positions from different server processes
// can tie, and the id breaks the tie.
func marker(m *msgDoc) string { return strconv.FormatInt(m.K, 10) + "." + m.ID }

func afterMarker(mk string) (bson.E, bool) {
	ks, id, _ := strings.Cut(mk, ".")
	k, err := strconv.ParseInt(ks, 10, 64)
	if err != nil {
		return bson.E{}, false
	}
	return bson.E{Key: "$or", Value: bson.A{
		bson.M{"k": bson.M{"$gt": k}},
		bson.M{"k": k, "_id": bson.M{"$gt": id}},
	}}, true
}

var byPosition = bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}}

// listedFilter matches what a listing of q shows: the queue's messages and,
// while a move has a batch in transit, the batch. Take takes the newest and
// keeps their positions, so the batch sorts after everything left; a
// listing that stopped short of it would send a caller going on to the
// target past it.
func listedFilter(q storage.QueueRef) bson.D {
	return bson.D{{Key: "p", Value: q.Project}, {Key: "q", Value: bson.M{"$in": bson.A{q.Name, transitRef(q).Name}}}}
}

// List returns live messages after the marker, oldest first.
func (s messageStore) List(ctx context.Context, q storage.QueueRef, o storage.ListMessagesOptions) ([]storage.Message, string, error) {
	const op = storage.OpMessageList
	now := s.d.now()
	f := append(listedFilter(q), alive(now))
	if !o.IncludeDelayed {
		f = append(f, bson.E{Key: "d", Value: bson.M{"$lte": now}})
	}
	if !o.Echo && o.ClientID != "" {
		f = append(f, bson.E{Key: "u", Value: bson.M{"$ne": o.ClientID}})
	}
	read := func(after *bson.E) ([]msgDoc, error) {
		and := bson.A{}
		if after != nil {
			and = append(and, bson.D{*after})
		}
		if !o.IncludeClaimed {
			and = append(and, bson.D{free(now)})
		}
		f := f
		if len(and) > 0 {
			f = append(f[:len(f):len(f)], bson.E{Key: "$and", Value: and})
		}
		return s.d.findMessages(ctx, f, options.Find().SetSort(byPosition).SetLimit(int64(o.Limit)))
	}
	var docs []msgDoc
	var err error
	switch after, ok := afterMarker(o.Marker); {
	case o.Marker == "":
		docs, err = read(nil)
	case ok:
		docs, err = read(&after)
	case storage.IsMessageID(o.Marker):
		docs, err = s.afterMessage(ctx, q, o.Marker, read)
	default:
		return nil, "", storage.E(op, storage.Invalid, fmt.Errorf("%w %q", storage.ErrMarker, o.Marker))
	}
	if err != nil {
		return nil, "", wrap(op, err)
	}
	if len(docs) == 0 {
		// Empty, or moved away: a tombstone says which.
		return nil, "", s.d.tombstone(ctx, op, q)
	}
	// A full page names where it ended, as with the other drivers, so a
	// caller learns it without asking again.
	next := ""
	if len(docs) == o.Limit {
		next = marker(&docs[len(docs)-1])
	}
	out := make([]storage.Message, len(docs))
	for i := range docs {
		out[i] = docs[i].message(now)
	}
	return out, next, nil
}

// afterMessage reads the page after message id (Zaqar's marker form), or
// from the start when it is gone. A message that was not there when looked
// up may arrive before the page is read: a batch imported while its queue
// moves, newest message first. The pooled driver resumes on a move's
// target after the last message it listed on the source, so the lookup is
// repeated once the page is read, and the page read again after the
// message if it arrived meanwhile.
func (s messageStore) afterMessage(ctx context.Context, q storage.QueueRef, id string, read func(after *bson.E) ([]msgDoc, error)) ([]msgDoc, error) {
	lookup := func() (*bson.E, error) {
		var doc msgDoc
		err := s.d.messages.FindOne(ctx, append(listedFilter(q), bson.E{Key: "_id", Value: id})).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		after, _ := afterMarker(marker(&doc))
		return &after, nil
	}
	after, err := lookup()
	if err != nil {
		return nil, err
	}
	if after != nil {
		return read(after)
	}
	docs, err := read(nil)
	if err != nil {
		return nil, err
	}
	if after, err = lookup(); err != nil || after == nil {
		return docs, err
	}
	return read(after)
}

func (d *Driver) findMessages(ctx context.Context, f any, fo *options.FindOptionsBuilder) ([]msgDoc, error) {
	cur, err := d.messages.Find(ctx, f, fo)
	if err != nil {
		return nil, err
	}
	var docs []msgDoc
	err = cur.All(ctx, &docs)
	return docs, err
}

// Get returns one live message.
func (s messageStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Message, error) {
	const op = storage.OpMessageGet
	now := s.d.now()
	var doc msgDoc
	err := s.d.messages.FindOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: id}, alive(now))).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		if err := s.d.moveRedirect(ctx, op, q, []string{id}, nil); err != nil {
			return storage.Message{}, err
		}
		return storage.Message{}, storage.E(op, storage.NotFound, storage.ErrNoMessage)
	}
	if err != nil {
		return storage.Message{}, wrap(op, err)
	}
	return doc.message(now), nil
}

// GetMany returns the live messages among ids in position order.
func (s messageStore) GetMany(ctx context.Context, q storage.QueueRef, ids []string) ([]storage.Message, error) {
	const op = storage.OpMessageGetMany
	now := s.d.now()
	docs, err := s.d.findMessages(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: bson.M{"$in": ids}}, alive(now)),
		options.Find().SetSort(byPosition))
	if err != nil {
		return nil, wrap(op, err)
	}
	if len(docs) < len(ids) {
		// Some are missing: one in transit makes the caller retry, a
		// finished queue sends it on; moved ones the caller reads on the
		// target.
		w, target, err := s.d.whereAre(ctx, q, ids, nil)
		if err != nil {
			return nil, wrap(op, err)
		}
		if w == inTransit || w == finished {
			return nil, w.answer(op, target)
		}
	}
	out := make([]storage.Message, len(docs))
	for i := range docs {
		out[i] = docs[i].message(now)
	}
	return out, nil
}

// Delete removes one message, honouring a live claim on it.
func (s messageStore) Delete(ctx context.Context, q storage.QueueRef, id, claimID string) error {
	const op = storage.OpMessageDelete
	// A delete that met nothing because the message changed since it was
	// read (a claim took it, or released it) decides again on the message
	// as it is now: acknowledged, the delete of a message whose claim was
	// released meanwhile left the message in the queue (Claims/EndsRace).
	for range 3 {
		done, err := s.deleteOnce(ctx, op, q, id, claimID)
		if done || err != nil {
			return err
		}
	}
	return storage.E(op, storage.Unavailable, fmt.Errorf("message %s kept changing", id))
}

// deleteOnce is one try of Delete; done is false when the message changed
// between the read and the delete, and nothing was decided.
func (s messageStore) deleteOnce(ctx context.Context, op string, q storage.QueueRef, id, claimID string) (done bool, err error) {
	now := s.d.now()
	var doc msgDoc
	err = s.d.messages.FindOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: id}, alive(now))).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		// Gone, or moved: then the target deletes it.
		return true, s.d.moveRedirect(ctx, op, q, []string{id}, nil)
	}
	if err != nil {
		return true, wrap(op, err)
	}
	f := append(queueFilter(q), bson.E{Key: "_id", Value: id})
	held := doc.CL != "" && doc.CE > now
	switch {
	case held && claimID == "":
		return true, storage.E(op, storage.Forbidden, storage.ErrClaimed)
	case claimID != "" && !held:
		return true, storage.E(op, storage.Invalid, storage.ErrNotClaimed)
	case claimID != "" && claimID != doc.CL:
		// Another live claim's id: the message is someone else's (403).
		n, err := s.d.claims.CountDocuments(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: claimID}, alive(now)))
		if err != nil {
			return true, wrap(op, err)
		}
		if n > 0 {
			return true, storage.E(op, storage.Forbidden, storage.ErrClaimed)
		}
		return true, storage.E(op, storage.Invalid, storage.ErrNotHolder)
	case held:
		f = append(f, bson.E{Key: "cl", Value: claimID})
	default:
		f = append(f, free(now))
	}
	res, err := s.d.messages.DeleteOne(ctx, f)
	if err != nil {
		return true, wrap(op, err)
	}
	if res.DeletedCount == 0 {
		// It changed since the read: a Take may have put it in transit,
		// and a delete that met nothing must not be acknowledged for a
		// message that moves on; otherwise, decide again.
		return false, s.d.moveRedirect(ctx, op, q, []string{id}, nil)
	}
	return true, wrap(op, s.d.dropLocks(ctx, []string{id}))
}

// DeleteMany removes the listed messages that are free or held by claimID.
func (s messageStore) DeleteMany(ctx context.Context, q storage.QueueRef, ids []string, claimID string) error {
	const op = storage.OpMessageDeleteMany
	now := s.d.now()
	held := bson.A{bson.M{"cl": ""}, bson.M{"ce": bson.M{"$lte": now}}}
	if claimID != "" {
		held = append(held, bson.M{"cl": claimID})
	}
	// One of them in transit: nothing is deleted, the caller retries. One
	// moved: what is here goes, then the caller repeats on the target.
	w, target, err := s.d.whereAre(ctx, q, ids, nil)
	if err != nil {
		return wrap(op, err)
	}
	if w == inTransit || w == finished {
		return w.answer(op, target)
	}
	f := append(queueFilter(q), bson.E{Key: "_id", Value: bson.M{"$in": ids}}, bson.E{Key: "$or", Value: held})
	res, err := s.d.messages.DeleteMany(ctx, f)
	if err != nil {
		return wrap(op, err)
	}
	if err := s.d.dropLocks(ctx, ids); err != nil {
		return wrap(op, err)
	}
	if w == notMoved && int(res.DeletedCount) < len(ids) {
		// Some were not here: a Take may have put them in transit since
		// the look above. Deleting is idempotent, so the caller retries
		// (or repeats it on the target) for those.
		if w, target, err = s.d.whereAre(ctx, q, ids, nil); err != nil {
			return wrap(op, err)
		}
	}
	return w.answer(op, target)
}

// Pop removes and returns up to limit of the oldest free, visible messages.
// Each removal is a version change, so a message popped here is never also
// handed to a claim.
func (s messageStore) Pop(ctx context.Context, q storage.QueueRef, limit int) ([]storage.Message, error) {
	const op = storage.OpMessagePop
	if err := s.d.claimable(ctx, op, q); err != nil {
		return nil, err
	}
	var out []storage.Message
	err := s.d.eachFree(ctx, q, limit, func(doc *msgDoc, now int64) (outcome, error) {
		ok, err := s.d.deleteVersion(ctx, doc)
		if !ok {
			return lost, err
		}
		out = append(out, doc.message(now))
		return took, err
	})
	if err == nil && len(out) == 0 {
		return nil, s.d.emptyStands(ctx, op, q)
	}
	return out, wrap(op, err)
}
