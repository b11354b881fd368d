-- KEYS: scope, project index, registry. ARGV: metadata JSON, name, scope,
-- sequence floor.
-- Creates the queue with the metadata unless it exists and raises its
-- sequence to at least the floor. A tombstone of an earlier move away goes:
-- the queue comes back. Returns 1.
if redis.call('HEXISTS', Q, 'z') == 1 then redis.call('DEL', Q) end
ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[1])
local floor = tonumber(ARGV[4])
if tonumber(redis.call('HGET', Q, 's') or '0') < floor then
  redis.call('HSET', Q, 's', ARGV[4])
end
return 1
