-- KEYS: scope, project index, registry.
-- ARGV: now, queue name, scope, then one or more requests, each: client id,
-- message count, then per message: id, ttl ms, delay ms, body. Concurrent
-- posts to one queue arrive here as one call (groupcommit.go), in the
-- order they were made. All messages are written in this one script, so
-- every request in it is stored whole or (on error before the first
-- write) not at all, and the reply, the same for each request, is what
-- each would have been told alone.
-- A delivery of every message to every deliverable live subscription is
-- recorded here too, so an acknowledged post always has its notifications.
-- Returns {0}.
--
-- The hottest script, so it spends as few commands as it can: one HMGET and
-- one HSET of the queue hash serve the queue's creation (as ensure), the
-- sequence, the keepalive horizon (as keepalive, which would read it
-- again) and the seal of a queue being moved (two more fields of the
-- read); only the indexes it creates get a TTL; and the expiry
-- step, which keeps the indexes of a queue nobody reads from bounded, runs
-- when the sequence crosses a multiple of 16: it drops up to BUDGET (500)
-- messages each time, far more than 16 sequence numbers add. Claim
-- bookkeeping waits for the calls that need it.
local now = tonumber(ARGV[1])
-- One pass over the requests counts the messages and finds the horizon,
-- so the queue hash is written once.
local n, maxe = 0, 0
do
  local i = 4
  while i <= #ARGV do
    local count = tonumber(ARGV[i + 1])
    for j = 0, count - 1 do
      local e = now + tonumber(ARGV[i + 3 + j * 4])
      if e > maxe then maxe = e end
    end
    n = n + count
    i = i + 2 + count * 4
  end
end
local qh = redis.call('HMGET', Q, 'm', 's', 'x', 'g', 'z')
-- Sealed (or a tombstone): posts go to the target. A lapsed tombstone is
-- no queue at all.
if qh[4] then
  if not qh[5] or tonumber(qh[5]) > now then return moved_reply(qh[4]) end
  redis.call('DEL', Q)
  qh = {}
end
local seq = tonumber(qh[2] or '0')
if math.floor((seq + n) / 16) > math.floor(seq / 16) then expire(now) end
local x = tonumber(qh[3] or '0')
local renew = maxe > x
local qf = {'s', seq + n}
if renew then
  x = maxe + SLACK
  qf[#qf + 1], qf[#qf + 2] = 'x', x
end
if not qh[1] then
  qf[#qf + 1], qf[#qf + 2] = 'm', '{}'
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[3])
end
redis.call('HSET', Q, unpack(qf))

-- Index entries are collected and added with one ZADD per index, so a
-- batch costs one call per message plus a few, not four per message.
local ids, exps, rdy, dly = {}, {}, {}, {}
-- Subscribers to notify: their deliveries are recorded with the messages.
local subs = redis.call('ZRANGEBYSCORE', SD, '(' .. now, '+inf')
local r = 4
while r <= #ARGV do
  local client, count = ARGV[r], tonumber(ARGV[r + 1])
  for b = r + 2, r + 2 + (count - 1) * 4, 4 do
    local id, ttl, delay, body = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), ARGV[b + 3]
    seq = seq + 1
    local e = now + ttl
    -- Each number written once, as the strings every command takes.
    local ss, es = digits(seq), digits(e)
    local mk = mkey(id)
    if delay > 0 then
      local ds = digits(now + delay)
      redis.call('HSET', mk, 'b', body, 'c', ARGV[1], 'e', es, 's', ss, 'u', client, 'd', ds)
      dly[#dly + 1] = ds
      dly[#dly + 1] = id
    else
      redis.call('HSET', mk, 'b', body, 'c', ARGV[1], 'e', es, 's', ss, 'u', client)
      rdy[#rdy + 1] = ss
      rdy[#rdy + 1] = id
    end
    redis.call('PEXPIRE', mk, ARGV[b + 1])
    if #subs > 0 then record_deliveries(subs, now, id, ttl, body, e) end
    ids[#ids + 1] = ss
    ids[#ids + 1] = id
    exps[#exps + 1] = es
    exps[#exps + 1] = id
  end
  r = r + 2 + count * 4
end
local written = {IDS, EXP}
if #rdy > 0 then written[#written + 1] = RDY end
if #dly > 0 then written[#written + 1] = DLY end
-- As keepalive (hold_until): a new horizon goes to every index; otherwise
-- only an index this call creates (absent before it; a fresh key has no
-- TTL) gets it.
local fresh = renew and {} or absent(unpack(written))
-- In chunks: a post of thousands of small messages is more than Lua can
-- unpack into one call.
zchunks('ZADD', IDS, ids)
zchunks('ZADD', EXP, exps)
zchunks('ZADD', RDY, rdy)
zchunks('ZADD', DLY, dly)
hold_until(P, now, x, renew, fresh)
return {0}
