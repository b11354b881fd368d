package catalog

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
	mongodrv "sluice.dev/server/internal/storage/mongo"
)

// migrationDoc is a queue's latest move, _id the placement key; times in
// Unix milliseconds (0: unset).
type migrationDoc struct {
	Key       string `bson:"_id"`
	From      string `bson:"from"`
	To        string `bson:"to"`
	State     string `bson:"state"`
	Moved     int64  `bson:"moved"`
	Remaining int64  `bson:"remaining"`
	Batches   int64  `bson:"batches"`
	Started   int64  `bson:"started"`
	Finished  int64  `bson:"finished"`
	Error     string `bson:"error"`
	Owner     string `bson:"owner"`
	Lease     int64  `bson:"lease"`
}

var activeStates = bson.M{"$in": bson.A{StateSealing, StateMoving}}

func (d migrationDoc) migration() Migration {
	m := Migration{Queue: parseKey(d.Key), From: d.From, To: d.To, State: d.State, Moved: d.Moved,
		Remaining: d.Remaining, Batches: d.Batches, Started: time.UnixMilli(d.Started), Error: d.Error,
		Owner: d.Owner, Lease: time.UnixMilli(d.Lease)}
	if d.Finished > 0 {
		m.Finished = time.UnixMilli(d.Finished)
	}
	return m
}

func (s *mongoStore) migrations() *mongo.Collection { return s.db.Collection("migrations") }

// alone runs write, which changes q's move record, alone among this
// catalog's writers of it (a no-op on MongoDB, see DocLocks). On FerretDB
// the filters below would otherwise decide nothing: two takeovers of a
// lapsed lease both matched, and an owner's lease renewal could put back
// the state its own update had just changed.
func (s *mongoStore) alone(ctx context.Context, q storage.QueueRef, write func() error) error {
	return s.locks.Alone(ctx, "migration:"+placementKey(q), nil, write)
}

// updateRecord is one update of q's move record, alone (see alone).
func (s *mongoStore) updateRecord(ctx context.Context, q storage.QueueRef, filter, upd bson.M) (res *mongo.UpdateResult, err error) {
	err = s.alone(ctx, q, func() error {
		res, err = s.migrations().UpdateOne(ctx, filter, upd)
		return err
	})
	return res, err
}

// StartMigration inserts the record unless an active one exists: the upsert
// matches only an ended record, so of two concurrent starts one inserts
// and the other meets a duplicate key and reads the winner.
func (s *mongoStore) StartMigration(ctx context.Context, m Migration) (Migration, bool, error) {
	const op = "catalog.migrate"
	cur, err := s.Lookup(ctx, m.Queue)
	if err != nil {
		return Migration{}, false, err
	}
	answer := ""
	prev, err := s.GetMigration(ctx, m.Queue)
	switch {
	case cur == "":
		answer = "nf"
	case err == nil && prev.Active():
		return s.activeAnswer(op, prev, m)
	case err != nil && !storage.Is(err, storage.NotFound):
		return Migration{}, false, err
	case cur == m.To:
		answer = "same"
	default:
		if n, err := s.pools.CountDocuments(ctx, bson.M{"_id": m.To}); err != nil {
			return Migration{}, false, merr(op, err)
		} else if n == 0 {
			answer = "nopool"
		}
	}
	if err := startRefusal(op, m, answer, cur); err != nil {
		return Migration{}, false, err
	}
	doc := migrationDoc{Key: placementKey(m.Queue), From: cur, To: m.To, State: StateSealing, Started: m.Started.UnixMilli(),
		Owner: m.Owner, Lease: m.Lease.UnixMilli()}
	err = s.alone(ctx, m.Queue, func() error {
		_, err := s.migrations().ReplaceOne(ctx, bson.M{"_id": doc.Key, "state": bson.M{"$nin": bson.A{StateSealing, StateMoving}}},
			doc, options.Replace().SetUpsert(true))
		return err
	})
	if mongodrv.IsDuplicateKey(err) {
		if prev, err := s.GetMigration(ctx, m.Queue); err == nil && prev.Active() {
			return s.activeAnswer(op, prev, m)
		}
	}
	if err != nil {
		return Migration{}, false, merr(op, err)
	}
	if err := s.bump(ctx); err != nil {
		return Migration{}, false, merr(op, err)
	}
	return doc.migration(), true, nil
}

func (s *mongoStore) activeAnswer(op string, prev, m Migration) (Migration, bool, error) {
	if prev.To == m.To {
		return prev, false, nil
	}
	return prev, false, busy(op, prev)
}

func (s *mongoStore) GetMigration(ctx context.Context, q storage.QueueRef) (Migration, error) {
	const op = "catalog.migration"
	var d migrationDoc
	err := s.migrations().FindOne(ctx, bson.M{"_id": placementKey(q)}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Migration{}, storage.E(op, storage.NotFound, storage.Public("queue "+q.Name+" has never moved"))
	}
	if err != nil {
		return Migration{}, merr(op, err)
	}
	return d.migration(), nil
}

func (s *mongoStore) LeaseMigration(ctx context.Context, q storage.QueueRef, owner string, now, lease time.Time) (Migration, error) {
	const op = "catalog.migration.lease"
	res, err := s.updateRecord(ctx, q, bson.M{"_id": placementKey(q), "state": activeStates,
		"$or": bson.A{bson.M{"owner": owner}, bson.M{"lease": bson.M{"$lt": now.UnixMilli()}}}},
		bson.M{"$set": bson.M{"owner": owner, "lease": lease.UnixMilli()}})
	if err != nil {
		return Migration{}, merr(op, err)
	}
	m, err := s.GetMigration(ctx, q)
	if err != nil || res.MatchedCount == 1 {
		return m, err
	}
	return m, leaseHeld(op, m)
}

// UpdateMigration first tries the update that keeps the state (counters
// per batch, no version change), then the one that changes it.
func (s *mongoStore) UpdateMigration(ctx context.Context, m Migration) error {
	const op = "catalog.migration.update"
	if err := checkUpdate(op, m); err != nil {
		return err
	}
	key := placementKey(m.Queue)
	set := bson.M{"$set": bson.M{"state": m.State, "moved": m.Moved, "remaining": m.Remaining, "batches": m.Batches,
		"error": m.Error, "lease": m.Lease.UnixMilli(), "finished": unixMilli(m.Finished)}}
	res, err := s.updateRecord(ctx, m.Queue, bson.M{"_id": key, "owner": m.Owner, "state": m.State}, set)
	if err != nil {
		return merr(op, err)
	}
	if res.MatchedCount == 1 {
		return nil
	}
	res, err = s.updateRecord(ctx, m.Queue, bson.M{"_id": key, "owner": m.Owner, "state": activeStates}, set)
	if err != nil {
		return merr(op, err)
	}
	if res.MatchedCount == 0 {
		cur, _ := s.GetMigration(ctx, m.Queue)
		return leaseHeld(op, cur)
	}
	return merr(op, s.bump(ctx))
}

// SwitchMigration moves the placement first, then ends the record: a crash
// in between leaves the record moving with the placement already on the
// target, and the switch run again finishes it.
func (s *mongoStore) SwitchMigration(ctx context.Context, q storage.QueueRef, owner string, finished time.Time) error {
	const op = "catalog.migration.switch"
	m, err := s.GetMigration(ctx, q)
	if err != nil {
		return err
	}
	if m.State == StateDone {
		return nil
	}
	if m.State != StateMoving || m.Owner != owner {
		return leaseHeld(op, m)
	}
	key := placementKey(q)
	if _, err := s.placements.UpdateOne(ctx, bson.M{"_id": key, "pool": m.From}, bson.M{"$set": bson.M{"pool": m.To}}); err != nil {
		return merr(op, err)
	}
	res, err := s.updateRecord(ctx, q, bson.M{"_id": key, "owner": owner, "state": StateMoving},
		bson.M{"$set": bson.M{"state": StateDone, "finished": finished.UnixMilli(), "owner": "", "lease": 0}})
	if err != nil {
		return merr(op, err)
	}
	if res.MatchedCount == 0 {
		cur, _ := s.GetMigration(ctx, q)
		if cur.State != StateDone {
			return leaseHeld(op, cur)
		}
	}
	return merr(op, s.bump(ctx))
}

func (s *mongoStore) ActiveMigrations(ctx context.Context) ([]Migration, error) {
	const op = "catalog.migrations"
	cur, err := s.migrations().Find(ctx, bson.M{"state": activeStates})
	if err != nil {
		return nil, merr(op, err)
	}
	var docs []migrationDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, merr(op, err)
	}
	out := make([]Migration, len(docs))
	for i, d := range docs {
		out[i] = d.migration()
	}
	return out, nil
}

func (s *mongoStore) QueuesOn(ctx context.Context, pool, after string, limit int) ([]storage.QueueRef, error) {
	const op = "catalog.queues"
	cur, err := s.placements.Find(ctx, bson.M{"pool": pool, "_id": bson.M{"$gt": after}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, merr(op, err)
	}
	var docs []placementDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, merr(op, err)
	}
	keys := make([]string, len(docs))
	for i, d := range docs {
		keys[i] = d.Key
	}
	return firstKeys(keys, limit), nil
}
