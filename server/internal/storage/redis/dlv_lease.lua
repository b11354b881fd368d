-- KEYS: the due index (shared by every queue). ARGV: now, limit, hold ms,
-- lease token. Takes up to limit due deliveries, holding each until
-- now+hold, and returns {next, leased}: next is the earliest due time left
-- in the index ('' when it is empty), leased a list of {scope, message id,
-- subscription id, body, ttl, created, expiry, attempts}. A due delivery
-- whose message expired or whose subscription is gone is given up
-- (counted failed) instead. The work is bounded: at most 4*limit+100
-- entries are looked at per call.
local now, limit, hold, token = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local DUE = KEYS[1]
local out = {}
local looked = 0
while #out < limit and looked < 4 * limit + 100 do
  local due = redis.call('ZRANGEBYSCORE', DUE, '-inf', now, 'LIMIT', 0, limit - #out)
  if #due == 0 then break end
  for _, m in ipairs(due) do
    looked = looked + 1
    local p, mid, sid = string.match(m, '^(.*)|([^|]+)|([^|]+)$')
    local kept = false
    if p then
      local dp = p .. ':dp:' .. sid
      local nk = p .. ':n:' .. mid
      local pend = redis.call('ZSCORE', dp, mid)
      local n = redis.call('HMGET', nk, 'b', 't', 'c', 'e')
      local se = redis.call('ZSCORE', p .. ':sx', sid)
      local subLive = se and tonumber(se) > now
      local dk = mid .. '.' .. sid
      if pend and n[1] and tonumber(n[4]) > now and subLive then
        local a = redis.call('HGET', p .. ':da', dk)
        local attempts = 0
        if a then attempts = tonumber(string.match(a, '^(%d+)')) end
        redis.call('HSET', p .. ':da', dk, attempts .. '|' .. token)
        redis.call('ZADD', DUE, now + hold, m)
        out[#out + 1] = {p, mid, sid, n[1], n[2], n[3], n[4], attempts}
        kept = true
      elseif pend then
        redis.call('ZREM', dp, mid)
        redis.call('HDEL', p .. ':da', dk)
        if redis.call('HINCRBY', nk, 'r', -1) <= 0 then redis.call('DEL', nk) end
        redis.call('HINCRBY', p .. ':ds', 'f', 1)
        if subLive then redis.call('HINCRBY', p .. ':ds', 'f:' .. sid, 1) end
      end
    end
    if not kept then redis.call('ZREM', DUE, m) end
  end
end
local first = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
return {first[2] or '', out}
