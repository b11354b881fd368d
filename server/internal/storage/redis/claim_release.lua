-- KEYS: scope. ARGV: now, claim id. Frees the claim's messages at once.
-- Returns {lapsed claims}.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local lapsed = advance(now)
local ck = ckey(cid)
local ids = split(redis.call('HGET', ck, 'i'))
for _, id in ipairs(ids) do
  local mk = mkey(id)
  if redis.call('HGET', mk, 'k') == cid then
    redis.call('HDEL', mk, 'k', 'x')
    redis.call('ZREM', HELD, id)
    local s = redis.call('ZSCORE', IDS, id)
    if s then redis.call('ZADD', RDY, s, id) end
  end
end
redis.call('DEL', ck)
redis.call('ZREM', CL, cid)
if #ids > 0 then refresh_ttl(RDY, now) end
return {lapsed}
