package mongo

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

type claimStore struct{ d *Driver }

// Create records the claim, then takes free messages one version change at a
// time, so no message is ever held by two live claims.
func (s claimStore) Create(ctx context.Context, q storage.QueueRef, o storage.ClaimOptions) (storage.Claim, error) {
	const op = storage.OpClaimCreate
	d := s.d
	if err := d.claimable(ctx, op, q); err != nil {
		return storage.Claim{}, err
	}
	if dl := o.DeadLetter; dl.Active() {
		away, err := d.movingAway(ctx, storage.QueueRef{Project: q.Project, Name: dl.Queue})
		if err != nil {
			return storage.Claim{}, wrap(op, err)
		}
		if away {
			// A message dead-lettered into a queue moving away from here
			// would be stranded: the policy waits until the queue lives
			// on one backend again, and the message is claimed instead.
			o.DeadLetter = nil
		}
	}
	now := d.now()
	// Lapsed claims are noticed here: deleting them is exclusive, so each
	// is reported once.
	if res, err := d.claims.DeleteMany(ctx, append(queueFilter(q), bson.E{Key: "e", Value: bson.M{"$lte": now}})); err != nil {
		return storage.Claim{}, wrap(op, err)
	} else if res.DeletedCount > 0 {
		d.events.ClaimsExpired(int(res.DeletedCount))
	}
	cid := uuid.NewString()
	exp := now + ms(o.TTL)
	cd := claimDoc{ID: cid, P: q.Project, Q: q.Name, TTL: ms(o.TTL), Grace: ms(o.Grace), C: now, E: exp, X: d.wallExpiry(exp)}
	if _, err := d.claims.InsertOne(ctx, cd); err != nil {
		return storage.Claim{}, wrap(op, err)
	}
	var ids []string
	// moved: messages this call dead-lettered; a queue that is its own
	// dead-letter queue must not hand them to this same claim.
	moved := map[string]bool{}
	err := d.eachFree(ctx, q, o.Limit, func(doc *msgDoc, now int64) (outcome, error) {
		if moved[doc.ID] {
			return lost, nil
		}
		if dl := o.DeadLetter; dl.Active() && doc.CC >= dl.MaxClaimCount {
			moved[doc.ID] = true
			return disposed, d.deadLetter(ctx, doc, dl, now)
		}
		e := max(doc.E, now+ms(o.TTL+o.Grace))
		ok, err := d.writeVersion(ctx, doc, bson.D{
			{Key: "cl", Value: cid}, {Key: "ce", Value: now + ms(o.TTL)}, {Key: "cc", Value: doc.CC + 1},
			{Key: "e", Value: e}, {Key: "t", Value: max(doc.T, ms(o.TTL+o.Grace))}, {Key: "x", Value: d.wallExpiry(e)},
		})
		if !ok {
			return lost, err
		}
		ids = append(ids, doc.ID)
		return took, err
	})
	if err == nil && len(ids) > 0 {
		var docs []msgDoc
		// Read back what the claim holds: a message deleted while it was
		// being claimed is not reported.
		docs, err = d.findMessages(ctx, bson.D{{Key: "_id", Value: bson.M{"$in": ids}}, {Key: "cl", Value: cid}}, options.Find().SetSort(byPosition))
		if err == nil && len(docs) > 0 {
			c := storage.Claim{ID: cid, TTL: o.TTL, Created: time.UnixMilli(now)}
			for i := range docs {
				c.Messages = append(c.Messages, docs[i].message(d.now()))
			}
			return c, nil
		}
	}
	// Nothing claimed (or a failure): the claim document goes again.
	_, _ = d.claims.DeleteOne(context.WithoutCancel(ctx), bson.M{"_id": cid})
	if err != nil {
		return storage.Claim{}, wrap(op, err)
	}
	return storage.Claim{}, d.emptyStands(ctx, op, q)
}

// deadLetter moves a message that was claimed too often to the dead-letter
// queue in one version change of the same document (so it can neither be
// lost nor duplicated).
func (d *Driver) deadLetter(ctx context.Context, doc *msgDoc, dl *storage.DeadLetter, now int64) error {
	if err := (queueStore{d}).ensure(ctx, storage.QueueRef{Project: doc.P, Name: dl.Queue}); err != nil {
		return err
	}
	ttl := doc.E - doc.C // its lifetime as it stands, as every driver keeps it
	if dl.TTL > 0 {
		ttl = ms(dl.TTL)
	}
	e := now + ttl
	ok, err := d.writeVersion(ctx, doc, bson.D{
		{Key: "q", Value: dl.Queue}, {Key: "k", Value: d.nextKeys(1)}, {Key: "c", Value: now}, {Key: "cl", Value: ""}, {Key: "ce", Value: int64(0)}, {Key: "cc", Value: 0},
		{Key: "t", Value: ttl}, {Key: "e", Value: e}, {Key: "d", Value: int64(0)}, {Key: "x", Value: d.wallExpiry(e)},
	})
	if ok {
		d.events.DeadLettered(1)
	}
	return err
}

func (s claimStore) live(ctx context.Context, op string, q storage.QueueRef, id string) (claimDoc, error) {
	var cd claimDoc
	err := s.d.claims.FindOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: id}, alive(s.d.now()))).Decode(&cd)
	if errors.Is(err, mongo.ErrNoDocuments) {
		if err := s.d.moveRedirect(ctx, op, q, nil, []string{id}); err != nil {
			return cd, err
		}
		return cd, storage.E(op, storage.NotFound, storage.ErrNoClaim)
	}
	return cd, wrap(op, err)
}

// Get returns a live claim and the messages it still holds.
func (s claimStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Claim, error) {
	const op = storage.OpClaimGet
	cd, err := s.live(ctx, op, q, id)
	if err != nil {
		return storage.Claim{}, err
	}
	now := s.d.now()
	docs, err := s.d.findMessages(ctx, append(queueFilter(q), bson.E{Key: "cl", Value: id},
		bson.E{Key: "ce", Value: bson.M{"$gt": now}}, alive(now)), options.Find().SetSort(byPosition))
	if err != nil {
		return storage.Claim{}, wrap(op, err)
	}
	c := storage.Claim{ID: id, TTL: time.Duration(cd.TTL) * time.Millisecond, Created: time.UnixMilli(cd.C)}
	for i := range docs {
		c.Messages = append(c.Messages, docs[i].message(now))
	}
	return c, nil
}

// Update renews a live claim from now, and its messages with it.
func (s claimStore) Update(ctx context.Context, q storage.QueueRef, id string, ttl, grace time.Duration) error {
	const op = storage.OpClaimUpdate
	if _, err := s.live(ctx, op, q, id); err != nil {
		return err
	}
	now := s.d.now()
	exp := now + ms(ttl)
	_, err := s.d.claims.UpdateOne(ctx, bson.M{"_id": id}, bson.D{{Key: "$set", Value: bson.D{
		{Key: "t", Value: ms(ttl)}, {Key: "g", Value: ms(grace)}, {Key: "e", Value: exp}, {Key: "x", Value: s.d.wallExpiry(exp)},
	}}})
	if err != nil {
		return wrap(op, err)
	}
	err = s.d.eachHeld(ctx, q, id, func(doc *msgDoc, now int64) bson.D {
		e := max(doc.E, now+ms(ttl+grace))
		return bson.D{{Key: "ce", Value: exp}, {Key: "e", Value: e}, {Key: "t", Value: max(doc.T, ms(ttl+grace))}, {Key: "x", Value: s.d.wallExpiry(e)}}
	})
	if err != nil {
		return wrap(op, err)
	}
	return s.d.heldAway(ctx, op, q, id)
}

// heldAway is the last step of a write to a claim's messages: one a Take
// put in transit (or moved) meanwhile did not see the write, so the caller
// repeats it (Moving) or makes it on the target (Moved); either way the
// write is idempotent. It costs a read of the queue's record.
func (d *Driver) heldAway(ctx context.Context, op string, q storage.QueueRef, claimID string) error {
	return d.moveRedirect(ctx, op, q, nil, []string{claimID})
}

// Delete releases the claim: its messages become free again.
func (s claimStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	const op = storage.OpClaimDelete
	res, err := s.d.claims.DeleteOne(ctx, append(queueFilter(q), bson.E{Key: "_id", Value: id}))
	if err != nil {
		return wrap(op, err)
	}
	if res.DeletedCount == 0 {
		// Released before, or moved: then the target releases it.
		if err := s.d.moveRedirect(ctx, op, q, nil, []string{id}); err != nil {
			return err
		}
	}
	err = s.d.eachHeld(ctx, q, id, func(*msgDoc, int64) bson.D {
		return bson.D{{Key: "cl", Value: ""}, {Key: "ce", Value: int64(0)}}
	})
	if err != nil {
		return wrap(op, err)
	}
	return s.d.heldAway(ctx, op, q, id)
}
