-- KEYS: scope, dead-letter queue scope, its project index, registry.
-- ARGV: now, dead-letter queue name, dead-letter scope, then one or more
-- claims, each: claim id, ttl
-- ms, grace ms, limit, max claim count (0: no policy), dead-letter ttl ms
-- (0: keep the message's own). Concurrent
-- claims on one queue arrive here as one call (groupcommit.go) and are
-- made in the order they were asked for.
-- Each takes the oldest free, visible messages; exhausted ones are moved
-- instead, after the claim is made, so a queue that is its own dead-letter
-- queue does not hand the moved message to the claim that moved it.
-- While a move has a batch in transit and nothing here is free: Moving
-- (lib.lua's busy). Returns one reply per claim: {lapsed claims,
-- dead-lettered, messages...} (the lapsed claims counted in the first), or
-- the error every claim would get.
local now, dlq = tonumber(ARGV[1]), ARGV[2]
local nclaims = (#ARGV - 3) / 6
local replies = {}
local answer, transit = busy(now)
if answer then
  for i = 1, nclaims do replies[i] = answer end
  return replies
end
local lapsed = advance(now)
incarnation()

-- move re-posts a message into the dead-letter queue under the same id.
local function move(id, h, dlttl)
  local DP = KEYS[2]
  local DQ = DP .. ':q'
  ensure(DQ, KEYS[3], KEYS[4], dlq, ARGV[3], '{}')
  local life = dlttl
  if life <= 0 then life = tonumber(h[3]) - tonumber(h[2]) end
  local e = now + life
  local seq = redis.call('HINCRBY', DQ, 's', 1)
  local dk = DP .. ':m:' .. id
  local fresh = absent(DP .. ':ids', DP .. ':exp', DP .. ':rdy')
  redis.call('HSET', dk, 'b', h[1], 'c', now, 'e', e, 's', seq, 'u', h[4] or '')
  redis.call('PEXPIRE', dk, life)
  redis.call('ZADD', DP .. ':ids', seq, id)
  redis.call('ZADD', DP .. ':exp', e, id)
  redis.call('ZADD', DP .. ':rdy', seq, id)
  keepalive(DP, now, e, fresh)
end

-- pull hands out the oldest free messages one at a time (free_head's
-- items): read at once for what every claim of the call asks (demand),
-- then again for what skipped ones (expired, delayed, dead-lettered) left
-- wanting. The claims take them in order, so each gets what it would have
-- read alone; messages a claim dead-letters into this very queue come
-- after all of them, as they would.
local demand = 0
for i = 0, nclaims - 1 do demand = demand + tonumber(ARGV[7 + i * 6]) end
local pool, pi = {}, 1
local function pull()
  if pi > #pool then
    if demand <= 0 then return nil end
    pool, pi = free_head(demand), 1
    if #pool == 0 then
      demand = 0
      return nil
    end
  end
  pi = pi + 1
  return pool[pi - 1]
end

-- claim makes one claim and returns its reply. The index entries of all
-- claims made (held: message -> claim end, claimed: claim -> its end) and
-- the claims themselves (records: :ch fields, lib.lua's claim_value) are
-- added after the last, one command per key, and the latest end is kept in
-- horizon for one keepalive: nothing in between reads those indexes.
-- b is where the claim's arguments start in ARGV; the strings among them
-- go to Redis as they came. A claim holds the entries of the stream area
-- it takes in place (lib.lua, "The stream area"): their :k fields (kept,
-- seq -> claim id) are written at the end too, and the cursor moves once.
-- An entry whose expiry the claim must raise becomes a message hash
-- (promoted), its index entries added at the end; entries skipped as
-- expired go at the end (xgone).
local horizon, held, claimed, records, pids, pexps, kept, xgone = 0, {}, {}, {}, {}, {}, {}, {}
local xlast -- the newest entry handled
local function claim(b, out)
  local cid, ttl, grace = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  local limit, maxcc, dlttl = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
  -- A dead-letter queue that is moving away (sealed, or a tombstone) takes
  -- no message here, where it would be stranded: the policy waits until the
  -- queue lives on one backend again.
  if maxcc > 0 and redis.call('HEXISTS', KEYS[2] .. ':q', 'g') == 1 then maxcc = 0 end
  local cexp = now + ttl
  local mexp = cexp + grace
  -- Numbers go to Redis as strings, each written once (lib.lua's digits).
  local cexps, mexps = digits(cexp), nil
  local taken, dead = {}, 0
  local moves = {}
  while #taken < limit do
    local it = pull()
    if not it then break end
    local id = it[1]
    if not id then
      local f = it[3]
      local ss = digits(it[2])
      local e = tonumber(f.e)
      xlast = it[2]
      if e >= mexp then
        id = xid(INC, it[2])
        kept[#kept + 1], kept[#kept + 2] = ss, cid
        held[#held + 1], held[#held + 2] = cexps, id
        taken[#taken + 1] = id
        demand = demand - 1
        out[#out + 1] = {id, f.b, f.c, f.e, '0', f.u or '', cid, cexps, '1'}
      elseif e > now then
        -- The claim outlives the entry: it becomes a message hash.
        id = xid(INC, it[2])
        local es = f.e
        if e < mexp then
          mexps = mexps or digits(mexp)
          es = mexps
        end
        xgone[#xgone + 1] = ss
        local mk = mkey(id)
        redis.call('HSET', mk, 'b', f.b, 'c', f.c, 'e', es, 's', ss, 'u', f.u or '', 'k', cid, 'x', cexps, 'n', '1')
        redis.call('PEXPIRE', mk, digits(tonumber(es) - now))
        pids[#pids + 1], pids[#pids + 2] = ss, id
        pexps[#pexps + 1], pexps[#pexps + 2] = es, id
        held[#held + 1], held[#held + 2] = cexps, id
        taken[#taken + 1] = id
        demand = demand - 1
        out[#out + 1] = {id, f.b, f.c, es, '0', f.u or '', cid, cexps, '1'}
      else
        xgone[#xgone + 1] = ss
      end
    else
      local mk = mkey(id)
      -- One read serves every check and the reply.
      local h = redis.call('HMGET', mk, 'b', 'c', 'e', 'd', 'u', 'n')
      local count = tonumber(h[6] or '0')
      if not h[1] or tonumber(h[3]) <= now then
        drop(id)
      elseif h[4] and tonumber(h[4]) > now then
        redis.call('ZADD', DLY, h[4], id) -- never claim a delayed message
      elseif maxcc > 0 and count >= maxcc then
        drop(id) -- first: the dead-letter queue may be this very queue
        moves[#moves + 1] = {id, {h[1], h[2], h[3], h[5]}}
      else
        count = count + 1
        local ns, es = digits(count), h[3]
        if tonumber(es) < mexp then
          mexps = mexps or digits(mexp)
          es = mexps
          redis.call('HSET', mk, 'k', cid, 'x', cexps, 'n', ns, 'e', es)
          redis.call('ZADD', EXP, es, id)
          redis.call('PEXPIRE', mk, digits(mexp - now))
        else
          redis.call('HSET', mk, 'k', cid, 'x', cexps, 'n', ns)
        end
        held[#held + 1] = cexps
        held[#held + 1] = id
        taken[#taken + 1] = id
        demand = demand - 1
        out[#out + 1] = {id, h[1], h[2], es, h[4] or '0', h[5] or '', cid, cexps, ns}
      end
    end
  end
  if #taken > 0 then
    records[#records + 1] = cid
    records[#records + 1] = claim_value(ARGV[b + 1], ARGV[b + 2], ARGV[1], cexps, table.concat(taken, ' '))
    claimed[#claimed + 1] = cexps
    claimed[#claimed + 1] = cid
    if mexp > horizon then horizon = mexp end
  end
  for _, mv in ipairs(moves) do move(mv[1], mv[2], dlttl) end
  if transit and #taken == 0 then return moving_reply() end
  out[2] = #moves
  return out
end

for i = 0, nclaims - 1 do
  local b = 4 + i * 6
  local first = 0
  if i == 0 then first = lapsed end
  replies[i + 1] = claim(b, {first, 0})
end
xdrop(xgone)
-- Every entry up to the newest one handled was held, promoted or dropped:
-- the cursor moves past it.
if xlast and xlast > XR then redis.call('HSET', Q, 'r', digits(xlast)) end
if horizon > 0 then
  -- :exp is not among them when nothing was promoted: a claim only moves
  -- entries it holds.
  local fresh
  if #pids > 0 then
    fresh = absent(HELD, CL, CH, K, IDS, EXP)
    zchunks('ZADD', IDS, pids)
    zchunks('ZADD', EXP, pexps)
  else
    fresh = absent(HELD, CL, CH, K)
  end
  if #kept > 0 then zchunks('HSET', K, kept) end
  redis.call('ZADD', HELD, unpack(held))
  redis.call('ZADD', CL, unpack(claimed))
  zchunks('HSET', CH, records)
  keepalive(P, now, horizon, fresh)
end
return replies
