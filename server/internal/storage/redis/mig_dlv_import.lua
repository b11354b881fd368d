-- KEYS: scope. ARGV: now, then 8 per delivery: message id, subscription
-- id, body, ttl, created, expiry, attempts, due. Records each delivery
-- whose subscription is live here and that is not pending here already,
-- as post's record_deliveries does, due at due with its attempts. Returns
-- how many it recorded.
local now = tonumber(ARGV[1])
local made = 0
for i = 2, #ARGV, 8 do
  local mid, sid, e = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 5])
  local se = redis.call('ZSCORE', SX, sid)
  if se and tonumber(se) > now and e > now and not redis.call('ZSCORE', dpkey(sid), mid) then
    local nk = nkey(mid)
    if redis.call('EXISTS', nk) == 0 then
      redis.call('HSET', nk, 'b', ARGV[i + 2], 't', ARGV[i + 3], 'c', ARGV[i + 4], 'e', e, 'r', 0)
      redis.call('PEXPIRE', nk, e - now)
    end
    redis.call('HINCRBY', nk, 'r', 1)
    redis.call('ZADD', dpkey(sid), e, mid)
    redis.call('ZADD', DUE, tonumber(ARGV[i + 7]), duemember(mid, sid))
    if tonumber(ARGV[i + 6]) > 0 then redis.call('HSET', DA, mid .. '.' .. sid, ARGV[i + 6] .. '|') end
    made = made + 1
  end
end
return made
