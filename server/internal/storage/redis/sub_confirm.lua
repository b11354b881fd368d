-- KEYS: scope. ARGV: now, id, confirmed ("1"/"0"). Returns 0, or 1 when
-- there is no such live subscription. A subscription is deliverable (in
-- :sd) when confirmed or when it never needed a confirmation.
local now = tonumber(ARGV[1])
sweep_subs(now)
local id = ARGV[2]
local e = redis.call('ZSCORE', SX, id)
if not e or tonumber(e) <= now then return 1 end
redis.call('HSET', skey(id), 'c', ARGV[3])
if ARGV[3] == '1' or redis.call('HGET', skey(id), 'n') ~= '1' then
  redis.call('ZADD', SD, e, id)
else
  redis.call('ZREM', SD, id)
end
return 0
