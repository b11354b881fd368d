-- KEYS: scope. ARGV: now, claim id, ttl ms, grace ms.
-- Renews a live claim from now and keeps its messages alive past it.
-- Returns {lapsed claims, 1 renewed or 0 no such claim}.
local now, cid, ttl, grace = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lapsed = advance(now)
local c = claim_read(cid)
if not c then
  local target, answer = move_state(now)
  return answer or whereabouts(cid, target) or {lapsed, 0}
end
if tonumber(c[4]) <= now then return {lapsed, 0} end
local fresh = absent(HELD, CL, CH, EXP)
local cexp = now + ttl
local mexp = cexp + grace
redis.call('HSET', CH, cid, claim_value(ARGV[3], ARGV[4], c[3], digits(cexp), c[5]))
redis.call('ZADD', CL, cexp, cid)
incarnation()
for _, id in ipairs(split(c[5])) do
  local mk = mkey(id)
  local f = redis.call('HMGET', mk, 'k', 'e')
  -- An entry held in place whose expiry the claim must now raise becomes
  -- a message hash (lib.lua's xpromote); one that outlives it stays.
  local seq = not f[2] and xseq(id)
  if seq and seq <= XR and redis.call('HGET', K, digits(seq)) == cid then
    local x = xread(seq)
    if x and tonumber(x.e) > now then
      redis.call('ZADD', HELD, cexp, id)
      if tonumber(x.e) < mexp then xpromote(seq, x, id, now, cid, digits(cexp), mexp) end
    end
  elseif f[1] == cid and tonumber(f[2]) > now then
    redis.call('HSET', mk, 'x', cexp)
    redis.call('ZADD', HELD, cexp, id)
    if tonumber(f[2]) < mexp then
      redis.call('HSET', mk, 'e', mexp)
      redis.call('ZADD', EXP, mexp, id)
      redis.call('PEXPIRE', mk, mexp - now)
    end
  end
end
keepalive(P, now, mexp, fresh)
return {lapsed, 1}
