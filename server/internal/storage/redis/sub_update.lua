-- KEYS: scope. ARGV: now, id, has subscriber, subscriber, has ttl, ttl ms,
-- has options, options JSON. Returns 0 (updated), 1 (no such live
-- subscription) or 2 (another subscription has that subscriber).
local now = tonumber(ARGV[1])
sweep_subs(now)
local id = ARGV[2]
local k = skey(id)
local cur = redis.call('ZSCORE', SX, id)
if not cur or tonumber(cur) <= now then return 1 end
if ARGV[3] == '1' then
  local was = redis.call('HGET', k, 's')
  if was ~= ARGV[4] then
    local other = redis.call('HGET', SN, ARGV[4])
    local oe = other and redis.call('ZSCORE', SX, other)
    if oe and tonumber(oe) > now then return 2 end
    redis.call('HDEL', SN, was)
    redis.call('HSET', SN, ARGV[4], id)
    redis.call('HSET', k, 's', ARGV[4])
  end
end
if ARGV[5] == '1' then
  local ttl = tonumber(ARGV[6])
  local e = now + ttl
  redis.call('HSET', k, 't', ttl, 'e', e)
  redis.call('ZADD', SX, e, id)
  if redis.call('ZSCORE', SD, id) then redis.call('ZADD', SD, e, id) end
end
if ARGV[7] == '1' then redis.call('HSET', k, 'o', ARGV[8]) end
return 0
