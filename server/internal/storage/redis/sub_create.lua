-- KEYS: scope. ARGV: now, id, subscriber, ttl ms, options JSON, needs
-- confirmation ("1"/"0"), expiry. Returns {id, 1} for a new subscription, or the
-- live subscription of the same subscriber as {its id, 0}.
local now = tonumber(ARGV[1])
sweep_subs(now)
local old = redis.call('HGET', SN, ARGV[3])
if old then
  local e = redis.call('ZSCORE', SX, old)
  if e and tonumber(e) > now then return {old, 0} end
end
local id, ttl = ARGV[2], tonumber(ARGV[4])
local e = tonumber(ARGV[7])
redis.call('HSET', skey(id), 's', ARGV[3], 't', ttl, 'o', ARGV[5], 'e', e, 'c', '0', 'n', ARGV[6])
redis.call('ZADD', SX, e, id)
redis.call('ZADD', SI, 0, id)
if ARGV[6] ~= '1' then redis.call('ZADD', SD, e, id) end
redis.call('HSET', SN, ARGV[3], id)
return {id, 1}
