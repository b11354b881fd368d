package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
	redisdrv "sluice.dev/server/internal/storage/redis"
)

// Redis keys of the management store.
const (
	kPools      = "sluice:catalog:pools"       // hash pool -> JSON
	kPoolFlavor = "sluice:catalog:pool-flavor" // hash pool -> flavor
	kFlavors    = "sluice:catalog:flavors"     // hash flavor -> JSON capabilities
	kPlacement  = "sluice:catalog:placement"   // hash "project\nqueue" -> pool
	kCounts     = "sluice:catalog:pool-queues" // hash pool -> queues placed
	kVersion    = "sluice:catalog:version"     // counter, bumped by every pool/flavor change
)

var allKeys = []string{kPools, kPoolFlavor, kFlavors, kPlacement, kCounts, kVersion}

type redisStore struct{ c redis.UniversalClient }

// openRedis opens the catalog with the store driver's client builder, so a
// URI behaves the same as catalog and as pool (redisdrv.NewClient has the
// forms: plain, rediss:// with tls_ca_file, Sentinel with its own auth).
func openRedis(ctx context.Context, u *url.URL) (Store, error) {
	s, err := newRedisStore(u)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newRedisStore builds the store without dialling.
func newRedisStore(u *url.URL) (*redisStore, error) {
	c, err := redisdrv.NewClient(u)
	if err != nil {
		return nil, storage.E("catalog.open", storage.Invalid, err)
	}
	return &redisStore{c: c}, nil
}

func rerr(op string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return nil
	}
	var se *storage.Error
	if errors.As(err, &se) {
		return err
	}
	if strings.HasPrefix(err.Error(), "ERR ") || strings.Contains(err.Error(), "WRONGTYPE") {
		return storage.E(op, storage.Internal, err)
	}
	return storage.E(op, storage.Unavailable, err)
}

func (s *redisStore) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return storage.E("catalog.ping", storage.Unavailable, err)
	}
	return nil
}

func (s *redisStore) Close() error { return s.c.Close() }

// putPoolScript: ARGV = name, pool JSON, flavor, URI, "1" if the pool must
// exist. Replies {created}, or {-1, other pool} when another pool has the
// URI, {-2} when the flavor does not exist, {-3} when the pool must exist
// and does not, without writing: each check and the write are one step, so
// a concurrent registration, delete or flavor delete cannot slip between
// them. Pools are few and registered rarely, so reading them all is cheap
// enough.
var putPoolScript = redis.NewScript(`
if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-3} end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= ARGV[1] and cjson.decode(all[i + 1]).uri == ARGV[4] then return {-1, all[i]} end
end
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[3]) == 0 then return {-2} end
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('HDEL', KEYS[2], ARGV[1]) else redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
redis.call('INCR', KEYS[3])
return {created}`)

func (s *redisStore) PutPool(ctx context.Context, p Pool) (bool, error) {
	return s.putPool(ctx, "catalog.pools.put", p, false)
}

func (s *redisStore) ReplacePool(ctx context.Context, p Pool) error {
	_, err := s.putPool(ctx, "catalog.pools.patch", p, true)
	return err
}

// scriptFlag is how the scripts take a boolean argument.
func scriptFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (s *redisStore) putPool(ctx context.Context, op string, p Pool, mustExist bool) (bool, error) {
	flavor := p.Flavor
	p.Flavor = ""
	res, err := putPoolScript.Run(ctx, s.c, []string{kPools, kPoolFlavor, kVersion, kFlavors}, p.Name, marshal(p), flavor, p.URI, scriptFlag(mustExist)).Slice()
	switch {
	case err != nil:
		return false, rerr(op, err)
	case res[0] == int64(-1):
		return false, uriTaken(op, fmt.Sprint(res[1]), p.URI)
	case res[0] == int64(-2):
		return false, noFlavor(op, flavor)
	case res[0] == int64(-3):
		return false, notFound(op, "Pool", p.Name)
	}
	return res[0] == int64(1), nil
}

func (s *redisStore) GetPool(ctx context.Context, name string) (Pool, error) {
	const op = "catalog.pools.get"
	vals, err := s.c.HMGet(ctx, kPools, name).Result()
	if err != nil {
		return Pool{}, rerr(op, err)
	}
	js, ok := vals[0].(string)
	if !ok {
		return Pool{}, notFound(op, "Pool", name)
	}
	var p Pool
	if err := decodeJSON(js, &p); err != nil {
		return Pool{}, storage.E(op, storage.Internal, err)
	}
	p.Flavor, err = s.c.HGet(ctx, kPoolFlavor, name).Result()
	return p, rerr(op, err)
}

func (s *redisStore) ListPools(ctx context.Context) ([]Pool, error) {
	const op = "catalog.pools.list"
	all, err := s.c.HGetAll(ctx, kPools).Result()
	if err != nil {
		return nil, rerr(op, err)
	}
	flavors, err := s.c.HGetAll(ctx, kPoolFlavor).Result()
	if err != nil {
		return nil, rerr(op, err)
	}
	out := make([]Pool, 0, len(all))
	for _, js := range all {
		var p Pool
		if err := decodeJSON(js, &p); err != nil {
			return nil, storage.E(op, storage.Internal, err)
		}
		p.Flavor = flavors[p.Name]
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var deletePoolScript = redis.NewScript(`
local n = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if n > 0 then return n end
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('INCR', KEYS[4])
return 0`)

func (s *redisStore) DeletePool(ctx context.Context, name string) error {
	const op = "catalog.pools.delete"
	n, err := deletePoolScript.Run(ctx, s.c, []string{kPools, kCounts, kPoolFlavor, kVersion}, name).Int()
	switch {
	case err != nil:
		return rerr(op, err)
	case n == -1:
		return notFound(op, "Pool", name)
	case n > 0:
		return inUse(op, name, n)
	}
	return nil
}

// putFlavorScript: ARGV = name, capabilities JSON, "1" if the flavor must
// exist (a patch), pool names...
var putFlavorScript = redis.NewScript(`
if ARGV[3] == '1' and redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then return {-3, ''} end
for i = 4, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then return {-1, ARGV[i]} end
end
local members = redis.call('HGETALL', KEYS[2])
for i = 1, #members, 2 do
  if members[i+1] == ARGV[1] then redis.call('HDEL', KEYS[2], members[i]) end
end
for i = 4, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], ARGV[1]) end
local created = redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[4])
return {created, ''}`)

func (s *redisStore) PutFlavor(ctx context.Context, f Flavor) (bool, error) {
	return s.putFlavor(ctx, "catalog.flavors.put", f, false)
}

func (s *redisStore) ReplaceFlavor(ctx context.Context, f Flavor) error {
	_, err := s.putFlavor(ctx, "catalog.flavors.patch", f, true)
	return err
}

// putFlavor runs putFlavorScript; mustExist: the flavor must exist already.
func (s *redisStore) putFlavor(ctx context.Context, op string, f Flavor, mustExist bool) (bool, error) {
	args := append([]any{f.Name, marshal(f.Capabilities), scriptFlag(mustExist)}, toAny(f.Pools)...)
	res, err := putFlavorScript.Run(ctx, s.c, []string{kPools, kPoolFlavor, kFlavors, kVersion}, args...).Slice()
	if err != nil {
		return false, rerr(op, err)
	}
	if res[0].(int64) == -3 {
		return false, notFound(op, "Flavor", f.Name)
	}
	if res[0].(int64) == -1 {
		return false, storage.E(op, storage.Invalid, fmt.Sprintf("Flavor %s could not be created: pool %v does not exist", f.Name, res[1]))
	}
	return res[0].(int64) == 1, nil
}

func (s *redisStore) flavorPools(ctx context.Context) (map[string][]string, error) {
	m, err := s.c.HGetAll(ctx, kPoolFlavor).Result()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for pool, fl := range m {
		out[fl] = append(out[fl], pool)
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out, nil
}

func (s *redisStore) GetFlavor(ctx context.Context, name string) (Flavor, error) {
	const op = "catalog.flavors.get"
	vals, err := s.c.HMGet(ctx, kFlavors, name).Result()
	if err != nil {
		return Flavor{}, rerr(op, err)
	}
	js, ok := vals[0].(string)
	if !ok {
		return Flavor{}, notFound(op, "Flavor", name)
	}
	f := Flavor{Name: name}
	_ = decodeJSON(js, &f.Capabilities)
	members, err := s.flavorPools(ctx)
	f.Pools = nonNil(members[name])
	return f, rerr(op, err)
}

func (s *redisStore) ListFlavors(ctx context.Context) ([]Flavor, error) {
	const op = "catalog.flavors.list"
	all, err := s.c.HGetAll(ctx, kFlavors).Result()
	if err != nil {
		return nil, rerr(op, err)
	}
	members, err := s.flavorPools(ctx)
	if err != nil {
		return nil, rerr(op, err)
	}
	out := make([]Flavor, 0, len(all))
	for name, js := range all {
		f := Flavor{Name: name, Pools: nonNil(members[name])}
		_ = decodeJSON(js, &f.Capabilities)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var deleteFlavorScript = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
local members = redis.call('HGETALL', KEYS[2])
for i = 1, #members, 2 do
  if members[i+1] == ARGV[1] then redis.call('HDEL', KEYS[2], members[i]) end
end
redis.call('INCR', KEYS[3])
return 1`)

func (s *redisStore) DeleteFlavor(ctx context.Context, name string) error {
	n, err := deleteFlavorScript.Run(ctx, s.c, []string{kFlavors, kPoolFlavor, kVersion}, name).Int()
	if err == nil && n == 0 {
		return notFound("catalog.flavors.delete", "Flavor", name)
	}
	return rerr("catalog.flavors.delete", err)
}

// placeScript records a placement if absent, refusing unknown pools, and
// keeps the per-pool queue count in the same step.
var placeScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return cur end
if ARGV[2] ~= ARGV[3] and redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then return '' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return ARGV[2]`)

func (s *redisStore) Place(ctx context.Context, q storage.QueueRef, pool string) (string, error) {
	const op = "catalog.place"
	got, err := placeScript.Run(ctx, s.c, []string{kPlacement, kCounts, kPools}, placementKey(q), pool, DefaultPool).Text()
	if err != nil {
		return "", rerr(op, err)
	}
	if got == "" {
		return "", storage.E(op, storage.Invalid, "pool "+pool+" is not registered")
	}
	return got, nil
}

func (s *redisStore) Lookup(ctx context.Context, q storage.QueueRef) (string, error) {
	p, err := s.c.HGet(ctx, kPlacement, placementKey(q)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return p, rerr("catalog.lookup", err)
}

var unplaceScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
return 1`)

func (s *redisStore) Unplace(ctx context.Context, q storage.QueueRef, pool string) error {
	return rerr("catalog.unplace", unplaceScript.Run(ctx, s.c, []string{kPlacement, kCounts}, placementKey(q), pool).Err())
}

func (s *redisStore) QueueCount(ctx context.Context, pool string) (int, error) {
	n, err := s.c.HGet(ctx, kCounts, pool).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, rerr("catalog.count", err)
}

func (s *redisStore) Version(ctx context.Context) (string, error) {
	v, err := s.c.Get(ctx, kVersion).Result()
	if errors.Is(err, redis.Nil) {
		return "0", nil
	}
	return v, rerr("catalog.version", err)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func (s *redisStore) Placements(ctx context.Context, project string) ([]string, error) {
	var out []string
	prefix := project + "\n"
	iter := s.c.HScan(ctx, kPlacement, 0, globEscape(prefix)+"*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		out = append(out, strings.TrimPrefix(key, prefix)+" -> "+iter.Val())
	}
	return out, rerr("catalog.placements", iter.Err())
}

// globEscape quotes the glob characters of a literal for MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
