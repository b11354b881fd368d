-- KEYS: scope, project index, registry.
-- ARGV: now, queue name, scope, an incarnation for the queue should it
-- have none yet (8 random bytes), then one or more
-- requests, each: client id, message count, then per message: ttl ms,
-- delay ms, body. Concurrent posts to one queue arrive here as one call
-- (groupcommit.go), in the order they were made. All messages are written
-- in this one script, so every request in it is stored whole or (on error
-- before the first write) not at all.
-- A delivery of every message to every deliverable live subscription is
-- recorded here too, so an acknowledged post always has its notifications.
-- Returns one reply per request: the incarnation (16 hex digits) followed
-- by the seq of its first message in decimal: its messages' ids are the
-- incarnation and consecutive seqs (lib.lua's xid). One string, which the
-- server parses without a reply array.
--
-- The hottest script, so it spends as few commands as it can: one HMGET and
-- one HSET of the queue hash serve the queue's creation (as ensure), the
-- sequence, the incarnation, the keepalive horizon (as keepalive, which
-- would read it again), the stream's expiry order and the seal of a queue
-- being moved (two more fields of the read); only the indexes it creates
-- get a TTL; and the expiry step, which keeps a queue nobody reads from
-- bounded, runs when the sequence crosses a multiple of 16: it drops up to
-- BUDGET (500) messages each time, far more than 16 sequence numbers add.
-- Claim bookkeeping waits for the calls that need it.
local now = tonumber(ARGV[1])
-- One pass over the requests counts the messages and finds the horizon,
-- so the queue hash is written once.
-- It also finds which keys the call writes (a message not delayed is an
-- entry of the stream area, a delayed one a message hash), and the
-- largest expiry among the messages bound for the stream.
local n, maxe, maxx, nreq, nx, nd = 0, 0, 0, 0, 0, 0
do
  local i = 5
  while i <= #ARGV do
    local count = tonumber(ARGV[i + 1])
    for j = i + 2, i + 2 + (count - 1) * 3, 3 do
      local e = now + tonumber(ARGV[j])
      if e > maxe then maxe = e end
      if tonumber(ARGV[j + 1]) > 0 then
        nd = nd + 1
      else
        nx = nx + 1
        if e > maxx then maxx = e end
      end
    end
    n = n + count
    nreq = nreq + 1
    i = i + 2 + count * 3
  end
end
local qh = redis.call('HMGET', Q, 'm', 's', 'x', 'g', 'z', 'i', 'h')
-- Sealed (or a tombstone): posts go to the target. A lapsed tombstone is
-- no queue at all.
if qh[4] then
  if not qh[5] or tonumber(qh[5]) > now then
    local replies = {}
    for i = 1, nreq do replies[i] = moved_reply(qh[4]) end
    return replies
  end
  redis.call('DEL', Q, X, XE, K)
  qh = {}
end
local seq = tonumber(qh[2] or '0')
local inc = qh[6]
if not inc then
  inc = ARGV[4]:gsub('.', function(c) return string.format('%02x', string.byte(c)) end)
end
INC, INCREAD = inc, true
if math.floor((seq + n) / 16) > math.floor(seq / 16) then
  expire(now)
  xtrim(now)
end
local x = tonumber(qh[3] or '0')
local renew = maxe > x
local qf = {'s', seq + n}
if renew then
  x = maxe + SLACK
  qf[#qf + 1], qf[#qf + 2] = 'x', x
end
if not qh[6] then qf[#qf + 1], qf[#qf + 2] = 'i', inc end
-- The largest expiry of a stream entry so far: entries expiring before it
-- are out of order (lib.lua, "The stream area").
local h = tonumber(qh[7] or '0')
if maxx > h then qf[#qf + 1], qf[#qf + 2] = 'h', digits(maxx) end
if not qh[1] then
  qf[#qf + 1], qf[#qf + 2] = 'm', '{}'
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[3])
end
redis.call('HSET', Q, unpack(qf))

-- As keepalive (hold_until): a new horizon goes to every index; otherwise
-- only an index this call creates (absent before it is written; a fresh
-- key has no TTL) gets it.
local fresh = {}
if not renew then
  local written = {}
  if nd > 0 then written[1], written[2], written[3] = IDS, EXP, DLY end
  if nx > 0 then written[#written + 1] = X end
  if #written > 0 then fresh = absent(unpack(written)) end
end
-- Index entries are collected and added with one ZADD per index, so a
-- batch costs one call per message plus a few, not four per message.
local ids, exps, dly, late = {}, {}, {}, {}
local replies = {}
-- Subscribers to notify: their deliveries are recorded with the messages.
local subs = redis.call('ZRANGEBYSCORE', SD, '(' .. now, '+inf')
local r = 5
while r <= #ARGV do
  local client, count = ARGV[r], tonumber(ARGV[r + 1])
  replies[#replies + 1] = inc .. digits(seq + 1)
  for b = r + 2, r + 2 + (count - 1) * 3, 3 do
    local ttl, delay, body = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), ARGV[b + 2]
    seq = seq + 1
    local e = now + ttl
    -- Each number written once, as the strings every command takes.
    local ss, es = digits(seq), digits(e)
    -- An entry needs its id only to be notified.
    local id, mk
    if delay > 0 or #subs > 0 then
      id = xid(inc, seq)
      mk = mkey(id)
    end
    if delay <= 0 then
      redis.call('XADD', X, ss .. '-0', 'b', body, 'c', ARGV[1], 'e', es, 'u', client)
      if e < h then
        late[#late + 1] = es
        late[#late + 1] = ss
      else
        h = e
      end
    else
      local ds = digits(now + delay)
      redis.call('HSET', mk, 'b', body, 'c', ARGV[1], 'e', es, 's', ss, 'u', client, 'd', ds)
      dly[#dly + 1] = ds
      dly[#dly + 1] = id
      redis.call('PEXPIRE', mk, ARGV[b])
      ids[#ids + 1] = ss
      ids[#ids + 1] = id
      exps[#exps + 1] = es
      exps[#exps + 1] = id
    end
    if #subs > 0 then record_deliveries(subs, now, id, ttl, body, e) end
  end
  r = r + 2 + count * 3
end
if #late > 0 and not renew and redis.call('EXISTS', XE) == 0 then fresh[#fresh + 1] = XE end
-- In chunks: a post of thousands of small messages is more than Lua can
-- unpack into one call.
zchunks('ZADD', IDS, ids)
zchunks('ZADD', EXP, exps)
zchunks('ZADD', DLY, dly)
zchunks('ZADD', XE, late)
hold_until(P, now, x, renew, fresh)
return replies
