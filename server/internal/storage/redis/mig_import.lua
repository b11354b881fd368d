-- KEYS: scope, project index, registry. ARGV: now, name, scope, batch JSON
-- (as mig_take.lua returns it).
-- Stores the batch's messages at their own seq with every attribute, and
-- its live claims. Every id is noted in :im first: an id imported before
-- is never stored again, even when it was deleted since. Expired messages
-- and lapsed claims are noted but not stored. Returns 1.
local now = tonumber(ARGV[1])
local b = cjson.decode(ARGV[4])
ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], '{}')
local claims = {}
for _, c in ipairs(b.c) do
  if redis.call('SADD', IM, c[1]) == 1 and tonumber(c[5]) > now then claims[c[1]] = {c, {}} end
end
local maxe, top = 0, tonumber(redis.call('HGET', Q, 's') or '0')
for _, m in ipairs(b.m) do
  local id, e, seq = m[1], tonumber(m[4]), tonumber(m[10])
  if redis.call('SADD', IM, id) == 1 and e > now and redis.call('EXISTS', mkey(id)) == 0 then
    local mk = mkey(id)
    redis.call('HSET', mk, 'b', m[2], 'c', m[3], 'e', m[4], 's', m[10], 'u', m[6])
    local d, n = tonumber(m[5]), tonumber(m[9])
    if d > 0 then redis.call('HSET', mk, 'd', m[5]) end
    if n > 0 then redis.call('HSET', mk, 'n', m[9]) end
    local c = claims[m[7]]
    if c then
      redis.call('HSET', mk, 'k', m[7], 'x', m[8])
      redis.call('ZADD', HELD, m[8], id)
      c[2][#c[2] + 1] = id
    elseif d > now then
      redis.call('ZADD', DLY, m[5], id)
    else
      redis.call('ZADD', RDY, m[10], id)
    end
    redis.call('PEXPIRE', mk, e - now)
    redis.call('ZADD', IDS, m[10], id)
    redis.call('ZADD', EXP, m[4], id)
    if e > maxe then maxe = e end
    if seq > top then top = seq end
  end
end
for cid, c in pairs(claims) do
  if #c[2] > 0 then
    local v = c[1]
    redis.call('HSET', ckey(cid), 't', v[2], 'g', v[3], 'c', v[4], 'e', v[5], 'i', table.concat(c[2], ' '))
    redis.call('PEXPIRE', ckey(cid), tonumber(v[5]) - now)
    redis.call('ZADD', CL, v[5], cid)
  end
end
redis.call('HSET', Q, 's', string.format('%.0f', top))
if maxe > 0 then keepalive(P, now, maxe, IDS, EXP, RDY, DLY, HELD, CL) end
return 1
