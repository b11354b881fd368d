-- KEYS: scope, dead-letter queue scope, its project index, registry.
-- ARGV: now, claim id, ttl ms, grace ms, limit, max claim count (0: no
-- policy), dead-letter queue name ("" : drop), dead-letter ttl ms (0: keep
-- the message's own), dead-letter scope.
-- Takes the oldest free, visible messages; exhausted ones are moved or
-- dropped instead. Returns {lapsed claims, dead-lettered, messages...}.
local now, cid, ttl, grace, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local maxcc, dlq, dlttl = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local cexp = now + ttl
local mexp = cexp + grace
local lapsed = advance(now)
local out, taken, dead = {lapsed, 0}, {}, 0

-- move re-posts a message into the dead-letter queue under the same id.
local function move(id, h)
  local DP = KEYS[2]
  local DQ = DP .. ':q'
  ensure(DQ, KEYS[3], KEYS[4], dlq, ARGV[9], '{}')
  local life = dlttl
  if life <= 0 then life = tonumber(h[3]) - tonumber(h[2]) end
  local e = now + life
  local seq = redis.call('HINCRBY', DQ, 's', 1)
  local dk = DP .. ':m:' .. id
  redis.call('HSET', dk, 'b', h[1], 'c', now, 'e', e, 's', seq, 'u', h[4] or '')
  redis.call('PEXPIRE', dk, life)
  redis.call('ZADD', DP .. ':ids', seq, id)
  redis.call('ZADD', DP .. ':exp', e, id)
  redis.call('ZADD', DP .. ':rdy', seq, id)
  keepalive(DP, now, e, DP .. ':ids', DP .. ':exp', DP .. ':rdy')
end

while #taken < limit do
  local ids = redis.call('ZRANGE', RDY, 0, limit - #taken - 1)
  if #ids == 0 then break end
  redis.call('ZREM', RDY, unpack(ids))
  for _, id in ipairs(ids) do
    local mk = mkey(id)
    local h = redis.call('HMGET', mk, 'e', 'n', 'd')
    if not h[1] or tonumber(h[1]) <= now then
      drop(id)
    elseif h[3] and tonumber(h[3]) > now then
      redis.call('ZADD', DLY, h[3], id) -- never claim a delayed message
    elseif maxcc > 0 and tonumber(h[2] or '0') >= maxcc then
      local body = redis.call('HMGET', mk, 'b', 'c', 'e', 'u')
      drop(id) -- first: the dead-letter queue may be this very queue
      if dlq ~= '' then move(id, body) end
      dead = dead + 1
    else
      redis.call('HSET', mk, 'k', cid, 'x', cexp)
      redis.call('HINCRBY', mk, 'n', 1)
      if tonumber(h[1]) < mexp then
        redis.call('HSET', mk, 'e', mexp)
        redis.call('ZADD', EXP, mexp, id)
        redis.call('PEXPIRE', mk, mexp - now)
      end
      redis.call('ZADD', HELD, cexp, id)
      taken[#taken + 1] = id
      out[#out + 1] = load(id, now)
    end
  end
end
if #taken > 0 then
  local ck = ckey(cid)
  redis.call('HSET', ck, 't', ttl, 'g', grace, 'c', now, 'e', cexp, 'i', table.concat(taken, ' '))
  redis.call('PEXPIRE', ck, ttl)
  redis.call('ZADD', CL, cexp, cid)
  keepalive(P, now, mexp, HELD, CL, EXP)
end
out[2] = dead
return out
