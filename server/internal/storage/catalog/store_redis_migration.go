package catalog

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
)

// Redis keys of moves: one hash per queue's latest move, and the set of
// queues moving now (what every replica's poll reads).
const (
	kMigrating       = "sluice:catalog:migrating" // set of placement keys with an active move
	kMigrationPrefix = "sluice:catalog:migration:"
)

func migrationKey(pkey string) string { return kMigrationPrefix + pkey }

// startMigrationScript: KEYS placement, pools, migration, migrating,
// version; ARGV placement key, target, owner, lease ms, started ms.
var startMigrationScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {'nf', ''} end
local st = redis.call('HGET', KEYS[3], 'state')
if st == 'sealing' or st == 'moving' then
  if redis.call('HGET', KEYS[3], 'to') == ARGV[2] then return {'dup', ''} end
  return {'busy', ''}
end
if cur == ARGV[2] then return {'same', cur} end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return {'nopool', ''} end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'from', cur, 'to', ARGV[2], 'state', 'sealing', 'moved', 0, 'remaining', 0,
  'batches', 0, 'started', ARGV[5], 'finished', 0, 'error', '', 'owner', ARGV[3], 'lease', ARGV[4])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('INCR', KEYS[5])
return {'ok', ''}`)

func (s *redisStore) StartMigration(ctx context.Context, m Migration) (Migration, bool, error) {
	const op = "catalog.migrate"
	pkey := placementKey(m.Queue)
	res, err := startMigrationScript.Run(ctx, s.c, []string{kPlacement, kPools, migrationKey(pkey), kMigrating, kVersion},
		pkey, m.To, m.Owner, m.Lease.UnixMilli(), m.Started.UnixMilli()).StringSlice()
	if err != nil {
		return Migration{}, false, rerr(op, err)
	}
	if err := startRefusal(op, m, res[0], res[1]); err != nil {
		if res[0] == "busy" {
			cur, gerr := s.GetMigration(ctx, m.Queue)
			if gerr == nil {
				return cur, false, busy(op, cur)
			}
		}
		return Migration{}, false, err
	}
	rec, err := s.GetMigration(ctx, m.Queue)
	return rec, res[0] == "ok", err
}

func (s *redisStore) GetMigration(ctx context.Context, q storage.QueueRef) (Migration, error) {
	const op = "catalog.migration"
	h, err := s.c.HGetAll(ctx, migrationKey(placementKey(q))).Result()
	if err != nil {
		return Migration{}, rerr(op, err)
	}
	if len(h) == 0 {
		return Migration{}, storage.E(op, storage.NotFound, storage.Public("queue "+q.Name+" has never moved"))
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(h[k], 10, 64); return n }
	m := Migration{Queue: q, From: h["from"], To: h["to"], State: h["state"], Moved: num("moved"),
		Remaining: num("remaining"), Batches: num("batches"), Started: time.UnixMilli(num("started")),
		Error: h["error"], Owner: h["owner"], Lease: time.UnixMilli(num("lease"))}
	if f := num("finished"); f > 0 {
		m.Finished = time.UnixMilli(f)
	}
	return m, nil
}

var leaseMigrationScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'nf' end
if st ~= 'sealing' and st ~= 'moving' then return 'ended' end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] and tonumber(redis.call('HGET', KEYS[1], 'lease')) >= tonumber(ARGV[2]) then return 'held' end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'lease', ARGV[3])
return 'ok'`)

func (s *redisStore) LeaseMigration(ctx context.Context, q storage.QueueRef, owner string, now, lease time.Time) (Migration, error) {
	const op = "catalog.migration.lease"
	res, err := leaseMigrationScript.Run(ctx, s.c, []string{migrationKey(placementKey(q))}, owner, now.UnixMilli(), lease.UnixMilli()).Text()
	if err != nil {
		return Migration{}, rerr(op, err)
	}
	m, err := s.GetMigration(ctx, q)
	if err != nil || res == "ok" {
		return m, err
	}
	return m, leaseHeld(op, m)
}

// updateMigrationScript: KEYS migration, migrating, version; ARGV owner,
// placement key, state, moved, remaining, batches, error, lease, finished.
var updateMigrationScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if (st ~= 'sealing' and st ~= 'moving') or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'moved', ARGV[4], 'remaining', ARGV[5], 'batches', ARGV[6],
  'error', ARGV[7], 'lease', ARGV[8], 'finished', ARGV[9])
if ARGV[3] ~= 'sealing' and ARGV[3] ~= 'moving' then redis.call('SREM', KEYS[2], ARGV[2]) end
if ARGV[3] ~= st then redis.call('INCR', KEYS[3]) end
return 1`)

func (s *redisStore) UpdateMigration(ctx context.Context, m Migration) error {
	const op = "catalog.migration.update"
	if err := checkUpdate(op, m); err != nil {
		return err
	}
	pkey := placementKey(m.Queue)
	n, err := updateMigrationScript.Run(ctx, s.c, []string{migrationKey(pkey), kMigrating, kVersion}, m.Owner, pkey,
		m.State, m.Moved, m.Remaining, m.Batches, m.Error, m.Lease.UnixMilli(), unixMilli(m.Finished)).Int()
	if err != nil {
		return rerr(op, err)
	}
	if n == 0 {
		cur, _ := s.GetMigration(ctx, m.Queue)
		return leaseHeld(op, cur)
	}
	return nil
}

// switchMigrationScript: KEYS migration, migrating, placement, counts,
// version; ARGV owner, placement key, finished ms.
var switchMigrationScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if st == 'done' then return 1 end
if st ~= 'moving' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
local from, to = redis.call('HGET', KEYS[1], 'from'), redis.call('HGET', KEYS[1], 'to')
if redis.call('HGET', KEYS[3], ARGV[2]) == from then
  redis.call('HSET', KEYS[3], ARGV[2], to)
  if redis.call('HINCRBY', KEYS[4], from, -1) <= 0 then redis.call('HDEL', KEYS[4], from) end
  redis.call('HINCRBY', KEYS[4], to, 1)
end
redis.call('HSET', KEYS[1], 'state', 'done', 'finished', ARGV[3], 'owner', '', 'lease', 0)
redis.call('SREM', KEYS[2], ARGV[2])
redis.call('INCR', KEYS[5])
return 1`)

func (s *redisStore) SwitchMigration(ctx context.Context, q storage.QueueRef, owner string, finished time.Time) error {
	const op = "catalog.migration.switch"
	pkey := placementKey(q)
	n, err := switchMigrationScript.Run(ctx, s.c, []string{migrationKey(pkey), kMigrating, kPlacement, kCounts, kVersion},
		owner, pkey, finished.UnixMilli()).Int()
	if err != nil {
		return rerr(op, err)
	}
	if n == 0 {
		cur, _ := s.GetMigration(ctx, q)
		return leaseHeld(op, cur)
	}
	return nil
}

func (s *redisStore) ActiveMigrations(ctx context.Context) ([]Migration, error) {
	keys, err := s.c.SMembers(ctx, kMigrating).Result()
	if err != nil {
		return nil, rerr("catalog.migrations", err)
	}
	out := make([]Migration, 0, len(keys))
	for _, k := range keys {
		m, err := s.GetMigration(ctx, parseKey(k))
		if storage.Is(err, storage.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Active() {
			out = append(out, m)
		}
	}
	return out, nil
}

// QueuesOn scans the placement hash: pools are drained rarely, and the
// scan keeps the placement scripts unchanged (no per-pool index to keep in
// step with every placement written before moves existed).
func (s *redisStore) QueuesOn(ctx context.Context, pool, after string, limit int) ([]storage.QueueRef, error) {
	var keys []string
	iter := s.c.HScan(ctx, kPlacement, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		if iter.Val() == pool && key > after {
			keys = append(keys, key)
		}
	}
	if err := iter.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return nil, rerr("catalog.queues", err)
	}
	return firstKeys(keys, limit), nil
}

// firstKeys sorts keys and returns the first limit as queues.
func firstKeys(keys []string, limit int) []storage.QueueRef {
	sort.Strings(keys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]storage.QueueRef, len(keys))
	for i, k := range keys {
		out[i] = parseKey(k)
	}
	return out
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
