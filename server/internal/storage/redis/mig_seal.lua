-- KEYS: scope. ARGV: target, now.
-- Seals the queue: from now on post answers Moved(target). Sealing again
-- reports what the first seal saw. A queue that does not exist is sealed
-- too (its hash then holds only the seal).
-- Returns {seq, metadata JSON, exists "1"/"0"}.
local target, now = ARGV[1], tonumber(ARGV[2])
move_state(now) -- forgets a lapsed tombstone
local f = redis.call('HMGET', Q, 'g', 'gs', 'gm', 'ge', 'z', 's', 'm')
if f[1] then
  if f[1] ~= target or f[5] then return moved_reply(f[1]) end
  return {f[2], f[3], f[4]}
end
local seq, meta, exists = f[6] or '0', f[7] or '{}', f[7] and '1' or '0'
redis.call('HSET', Q, 'g', target, 'gs', seq, 'gm', meta, 'ge', exists)
return {seq, meta, exists}
