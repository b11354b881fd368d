package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
	mongodrv "sluice.dev/server/internal/storage/mongo"
)

// mongoStore keeps the catalog in four collections. Placement is an insert
// with the queue key as _id, so concurrent placements cannot both win.
type mongoStore struct {
	client                           *mongo.Client
	db                               *mongo.Database
	pools, flavors, placements, meta *mongo.Collection
	// locks lets one writer at a time change a move's record, where the
	// server would otherwise let one writer undo another (FerretDB).
	locks mongodrv.DocLocks
}

type poolDoc struct {
	Name    string `bson:"_id"`
	URI     string `bson:"uri"`
	Weight  int    `bson:"weight"`
	Flavor  string `bson:"flavor"`
	Options string `bson:"options"`
}

type flavorDoc struct {
	Name string `bson:"_id"`
	Caps string `bson:"caps"`
}

type placementDoc struct {
	Key  string `bson:"_id"`
	Pool string `bson:"pool"`
}

func openMongo(ctx context.Context, u *url.URL) (Store, error) {
	const op = "catalog.open"
	// The store driver's client builder: the same URI gets the same
	// timeouts and write concern as catalog and as pool.
	client, err := mongodrv.Connect(u)
	if err != nil {
		return nil, storage.E(op, storage.Invalid, err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		name = "sluice_catalog"
	}
	db := client.Database(name)
	s := &mongoStore{client: client, db: db, pools: db.Collection("pools"), flavors: db.Collection("flavors"),
		placements: db.Collection("placements"), meta: db.Collection("meta")}
	if _, err := s.placements.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "pool", Value: 1}}}); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, storage.E(op, storage.Unavailable, err)
	}
	// One pool per URI, kept by the server, as Zaqar keeps it: a check
	// before the write cannot hold against concurrent registrations. A
	// catalog that already holds two pools on one URI cannot take the index;
	// it is served without it (the catalog's own check still refuses new
	// ones), and gets it at the first start after one of them is removed.
	if _, err := s.pools.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "uri", Value: 1}},
		Options: options.Index().SetName("pools_uri").SetUnique(true)}); err != nil && !s.sharedURIs(ctx) {
		_ = client.Disconnect(context.Background())
		return nil, storage.E(op, storage.Unavailable, err)
	}
	if s.locks, err = mongodrv.NewDocLocks(ctx, db, db.Collection("locks")); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	return s, nil
}

// sharedURIs tells whether two pools have one URI, which is why the unique
// index could not be built: MongoDB says so with a duplicate key error,
// FerretDB with an internal one.
func (s *mongoStore) sharedURIs(ctx context.Context) bool {
	pools, err := s.ListPools(ctx)
	if err != nil {
		return false
	}
	seen := map[string]bool{}
	for _, p := range pools {
		if seen[p.URI] {
			return true
		}
		seen[p.URI] = true
	}
	return false
}

func merr(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *storage.Error
	if errors.As(err, &se) {
		return err
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || strings.Contains(err.Error(), "server selection") ||
		errors.Is(err, mongodrv.ErrLockBusy) {
		return storage.E(op, storage.Unavailable, err)
	}
	return storage.E(op, storage.Internal, err)
}

func (s *mongoStore) Ping(ctx context.Context) error {
	if err := s.db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		return storage.E("catalog.ping", storage.Unavailable, err)
	}
	return nil
}

func (s *mongoStore) Close() error { return s.client.Disconnect(context.Background()) }

// bump gives the catalog a new version token. A random token rather than a
// counter: FerretDB's $inc is a read-modify-write that can lose a
// concurrent increment, a fresh token cannot be lost that way.
func (s *mongoStore) bump(ctx context.Context) error {
	_, err := s.meta.UpdateOne(ctx, bson.M{"_id": "version"}, bson.M{"$set": bson.M{"v": uuid.NewString()}}, options.UpdateOne().SetUpsert(true))
	if mongodrv.IsDuplicateKey(err) {
		_, err = s.meta.UpdateOne(ctx, bson.M{"_id": "version"}, bson.M{"$set": bson.M{"v": uuid.NewString()}})
	}
	return err
}

func (s *mongoStore) Version(ctx context.Context) (string, error) {
	var doc struct {
		V string `bson:"v"`
	}
	err := s.meta.FindOne(ctx, bson.M{"_id": "version"}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "0", nil
	}
	return doc.V, merr("catalog.version", err)
}

func (s *mongoStore) PutPool(ctx context.Context, p Pool) (bool, error) {
	return s.putPool(ctx, "catalog.pools.put", p, false)
}

func (s *mongoStore) ReplacePool(ctx context.Context, p Pool) error {
	_, err := s.putPool(ctx, "catalog.pools.patch", p, true)
	return err
}

func (s *mongoStore) putPool(ctx context.Context, op string, p Pool, mustExist bool) (bool, error) {
	doc := poolDoc{Name: p.Name, URI: p.URI, Weight: p.Weight, Flavor: p.Flavor, Options: marshal(p.Options)}
	for tries := 1; ; tries++ {
		res, err := s.pools.ReplaceOne(ctx, bson.M{"_id": p.Name}, doc, options.Replace().SetUpsert(!mustExist))
		if mongodrv.IsDuplicateKey(err) {
			// The URI index refused it, or a concurrent upsert of the same
			// name won the insert; that one is replaced on the second try.
			var other poolDoc
			if e := s.pools.FindOne(ctx, bson.M{"uri": p.URI, "_id": bson.M{"$ne": p.Name}}).Decode(&other); e == nil {
				return false, uriTaken(op, other.Name, p.URI)
			}
			if tries < 2 {
				continue
			}
		}
		if err != nil {
			return false, merr(op, err)
		}
		if mustExist && res.MatchedCount == 0 {
			return false, notFound(op, "Pool", p.Name)
		}
		if err := s.leaveDeletedFlavor(ctx, op, p); err != nil {
			return false, err
		}
		return res.UpsertedCount == 1, merr(op, s.bump(ctx))
	}
}

// leaveDeletedFlavor takes a pool just written back out of its flavor if
// the flavor is gone. DeleteFlavor deletes the flavor and then takes its
// pools out; a pool written in between would stay in a flavor that no
// longer exists. Looking for the flavor after the write, at least one of
// the two sees the other. The pool stays registered: as if it had joined
// just before the delete, which took it out.
func (s *mongoStore) leaveDeletedFlavor(ctx context.Context, op string, p Pool) error {
	if p.Flavor == "" {
		return nil
	}
	n, err := s.flavors.CountDocuments(ctx, bson.M{"_id": p.Flavor})
	if err != nil || n > 0 {
		return merr(op, err)
	}
	_, err = s.pools.UpdateOne(ctx, bson.M{"_id": p.Name, "flavor": p.Flavor}, bson.M{"$set": bson.M{"flavor": ""}})
	return merr(op, err)
}

func (d poolDoc) pool() Pool {
	p := Pool{Name: d.Name, URI: d.URI, Weight: d.Weight, Flavor: d.Flavor}
	_ = decodeJSON(d.Options, &p.Options)
	return p
}

func (s *mongoStore) GetPool(ctx context.Context, name string) (Pool, error) {
	var d poolDoc
	err := s.pools.FindOne(ctx, bson.M{"_id": name}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Pool{}, notFound("catalog.pools.get", "Pool", name)
	}
	return d.pool(), merr("catalog.pools.get", err)
}

func (s *mongoStore) ListPools(ctx context.Context) ([]Pool, error) {
	cur, err := s.pools.Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, merr("catalog.pools.list", err)
	}
	var docs []poolDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, merr("catalog.pools.list", err)
	}
	out := make([]Pool, len(docs))
	for i, d := range docs {
		out[i] = d.pool()
	}
	return out, nil
}

// DeletePool counts first; a queue placed between the count and the delete
// is caught by Place, which re-checks that its pool still exists.
func (s *mongoStore) DeletePool(ctx context.Context, name string) error {
	const op = "catalog.pools.delete"
	n, err := s.QueueCount(ctx, name)
	if err != nil {
		return err
	}
	if n > 0 {
		return inUse(op, name, n)
	}
	var doc poolDoc
	if err := s.pools.FindOneAndDelete(ctx, bson.M{"_id": name}).Decode(&doc); errors.Is(err, mongo.ErrNoDocuments) {
		return notFound(op, "Pool", name)
	} else if err != nil {
		return merr(op, err)
	}
	// A queue placed since the count: Place writes its placement and then
	// looks for the pool, this deleted the pool and now looks for
	// placements, so at least one of the two sees the other. Place
	// withdraws; here the pool is put back, and the version bumped for a
	// replica that read the catalog in between.
	if n, err = s.QueueCount(ctx, name); err != nil || n > 0 {
		// A duplicate: the pool was registered again meanwhile.
		if _, e := s.pools.InsertOne(ctx, doc); e != nil && !mongodrv.IsDuplicateKey(e) {
			return merr(op, e)
		}
		if e := s.bump(ctx); e != nil {
			return merr(op, e)
		}
		if err != nil {
			return err
		}
		return inUse(op, name, n)
	}
	return merr(op, s.bump(ctx))
}

func (s *mongoStore) PutFlavor(ctx context.Context, f Flavor) (bool, error) {
	return s.putFlavor(ctx, "catalog.flavors.put", f, false)
}

// ReplaceFlavor writes the flavor's own document first, only if it exists,
// so a flavor deleted since its patch read it is not written at all. A
// delete between that write and the pools' deletes the flavor and then
// takes its pools out; the pools written after that are taken out here:
// looking for the flavor after writing them, at least one of the two sees
// the other. Then the patch counts as made just before the delete.
func (s *mongoStore) ReplaceFlavor(ctx context.Context, f Flavor) error {
	_, err := s.putFlavor(ctx, "catalog.flavors.patch", f, true)
	return err
}

func (s *mongoStore) putFlavor(ctx context.Context, op string, f Flavor, mustExist bool) (bool, error) {
	for _, p := range f.Pools {
		if n, err := s.pools.CountDocuments(ctx, bson.M{"_id": p}); err != nil {
			return false, merr(op, err)
		} else if n == 0 {
			return false, storage.E(op, storage.Invalid, fmt.Sprintf("Flavor %s could not be created: pool %s does not exist", f.Name, p))
		}
	}
	replace := func() (*mongo.UpdateResult, error) {
		return s.flavors.ReplaceOne(ctx, bson.M{"_id": f.Name}, flavorDoc{Name: f.Name, Caps: marshal(f.Capabilities)}, options.Replace().SetUpsert(!mustExist))
	}
	if mustExist {
		res, err := replace()
		if err != nil {
			return false, merr(op, err)
		}
		if res.MatchedCount == 0 {
			return false, notFound(op, "Flavor", f.Name)
		}
	}
	if _, err := s.pools.UpdateMany(ctx, bson.M{"flavor": f.Name, "_id": bson.M{"$nin": f.Pools}}, bson.M{"$set": bson.M{"flavor": ""}}); err != nil {
		return false, merr(op, err)
	}
	if len(f.Pools) > 0 {
		if _, err := s.pools.UpdateMany(ctx, bson.M{"_id": bson.M{"$in": f.Pools}}, bson.M{"$set": bson.M{"flavor": f.Name}}); err != nil {
			return false, merr(op, err)
		}
	}
	if mustExist {
		n, err := s.flavors.CountDocuments(ctx, bson.M{"_id": f.Name})
		if err == nil && n == 0 {
			_, err = s.pools.UpdateMany(ctx, bson.M{"flavor": f.Name}, bson.M{"$set": bson.M{"flavor": ""}})
		}
		if err != nil {
			return false, merr(op, err)
		}
		return false, merr(op, s.bump(ctx))
	}
	res, err := replace()
	if err != nil {
		return false, merr(op, err)
	}
	return res.UpsertedCount == 1, merr(op, s.bump(ctx))
}

func (s *mongoStore) members(ctx context.Context, flavor string) ([]string, error) {
	cur, err := s.pools.Find(ctx, bson.M{"flavor": flavor}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []poolDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	out := []string{}
	for _, d := range docs {
		out = append(out, d.Name)
	}
	return out, nil
}

func (s *mongoStore) GetFlavor(ctx context.Context, name string) (Flavor, error) {
	const op = "catalog.flavors.get"
	var d flavorDoc
	err := s.flavors.FindOne(ctx, bson.M{"_id": name}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Flavor{}, notFound(op, "Flavor", name)
	}
	if err != nil {
		return Flavor{}, merr(op, err)
	}
	f := Flavor{Name: name}
	_ = decodeJSON(d.Caps, &f.Capabilities)
	f.Pools, err = s.members(ctx, name)
	return f, merr(op, err)
}

func (s *mongoStore) ListFlavors(ctx context.Context) ([]Flavor, error) {
	const op = "catalog.flavors.list"
	cur, err := s.flavors.Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, merr(op, err)
	}
	var docs []flavorDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, merr(op, err)
	}
	out := make([]Flavor, len(docs))
	for i, d := range docs {
		out[i] = Flavor{Name: d.Name}
		_ = decodeJSON(d.Caps, &out[i].Capabilities)
		if out[i].Pools, err = s.members(ctx, d.Name); err != nil {
			return nil, merr(op, err)
		}
	}
	return out, nil
}

func (s *mongoStore) DeleteFlavor(ctx context.Context, name string) error {
	const op = "catalog.flavors.delete"
	res, err := s.flavors.DeleteOne(ctx, bson.M{"_id": name})
	if err != nil {
		return merr(op, err)
	}
	if res.DeletedCount == 0 {
		return notFound(op, "Flavor", name)
	}
	if _, err := s.pools.UpdateMany(ctx, bson.M{"flavor": name}, bson.M{"$set": bson.M{"flavor": ""}}); err != nil {
		return merr(op, err)
	}
	return merr(op, s.bump(ctx))
}

func (s *mongoStore) Place(ctx context.Context, q storage.QueueRef, pool string) (string, error) {
	const op = "catalog.place"
	key := placementKey(q)
	_, err := s.placements.InsertOne(ctx, placementDoc{Key: key, Pool: pool})
	if mongodrv.IsDuplicateKey(err) {
		got, err := s.Lookup(ctx, q)
		return got, merr(op, err)
	}
	if err != nil {
		return "", merr(op, err)
	}
	if pool != DefaultPool { // the pool may have been deleted meanwhile
		if n, err := s.pools.CountDocuments(ctx, bson.M{"_id": pool}); err != nil || n == 0 {
			_, _ = s.placements.DeleteOne(ctx, bson.M{"_id": key, "pool": pool})
			if err != nil {
				return "", merr(op, err)
			}
			return "", storage.E(op, storage.Invalid, "pool "+pool+" is not registered")
		}
	}
	return pool, nil
}

func (s *mongoStore) Lookup(ctx context.Context, q storage.QueueRef) (string, error) {
	var d placementDoc
	err := s.placements.FindOne(ctx, bson.M{"_id": placementKey(q)}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	}
	return d.Pool, merr("catalog.lookup", err)
}

func (s *mongoStore) Unplace(ctx context.Context, q storage.QueueRef, pool string) error {
	_, err := s.placements.DeleteOne(ctx, bson.M{"_id": placementKey(q), "pool": pool})
	return merr("catalog.unplace", err)
}

func (s *mongoStore) QueueCount(ctx context.Context, pool string) (int, error) {
	n, err := s.placements.CountDocuments(ctx, bson.M{"pool": pool})
	return int(n), merr("catalog.count", err)
}

func (s *mongoStore) Placements(ctx context.Context, project string) ([]string, error) {
	prefix := project + "\n"
	cur, err := s.placements.Find(ctx, bson.M{"_id": bson.M{"$regex": "^" + regexp.QuoteMeta(prefix)}})
	if err != nil {
		return nil, merr("catalog.placements", err)
	}
	var docs []placementDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, merr("catalog.placements", err)
	}
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, strings.TrimPrefix(d.Key, prefix)+" -> "+d.Pool)
	}
	return out, nil
}
