-- KEYS: scope. ARGV: now, claim id. Frees the claim's messages at once.
-- Returns {lapsed claims}.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local lapsed = advance(now)
local c = claim_read(cid)
if not c then
  local target, answer = move_state(now)
  local w = answer or whereabouts(cid, target)
  if w then return w end
end
local ids = split(c and c[5])
for _, id in ipairs(ids) do
  local mk = mkey(id)
  if redis.call('HGET', mk, 'k') == cid then
    redis.call('HDEL', mk, 'k', 'x')
    redis.call('ZREM', HELD, id)
    local s = redis.call('ZSCORE', IDS, id)
    if s then redis.call('ZADD', RDY, s, id) end
  elseif xfree(id, now, cid) then
    redis.call('ZREM', HELD, id)
  end
end
claim_drop(cid)
if #ids > 0 then refresh_ttl(RDY, now) end
return {lapsed}
