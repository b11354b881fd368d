-- KEYS: scope, project index, registry.
-- ARGV: now, client id, queue name, scope, then per message: id, ttl ms,
-- delay ms, body. All messages are written in this one script, so a batch
-- is stored whole or (on error before the first write) not at all.
-- Posting only runs the expiry step of advance (which keeps the indexes of
-- a queue nobody reads from bounded); claim bookkeeping waits for the calls
-- that need it, keeping the hottest script short. A delivery of every
-- message to every deliverable live subscription is recorded here too, so
-- an acknowledged post always has its notifications. Returns {0}.
local now = tonumber(ARGV[1])
expire(now)
ensure(Q, KEYS[2], KEYS[3], ARGV[3], ARGV[4], '{}')
local n = (#ARGV - 4) / 4
local seq = redis.call('HINCRBY', Q, 's', n) - n
local client = ARGV[2]
local maxe = 0
-- Index entries are collected and added with one ZADD per index, so a
-- batch costs one call per message plus a few, not four per message.
local ids, exps, rdy, dly = {}, {}, {}, {}
-- Subscribers to notify: their deliveries are recorded with the messages.
local subs = redis.call('ZRANGEBYSCORE', SD, '(' .. now, '+inf')
for i = 0, n - 1 do
  local b = 5 + i * 4
  local id, ttl, delay, body = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), ARGV[b + 3]
  seq = seq + 1
  local e = now + ttl
  local mk = mkey(id)
  if delay > 0 then
    redis.call('HSET', mk, 'b', body, 'c', now, 'e', e, 's', seq, 'u', client, 'd', now + delay)
    dly[#dly + 1] = now + delay
    dly[#dly + 1] = id
  else
    redis.call('HSET', mk, 'b', body, 'c', now, 'e', e, 's', seq, 'u', client)
    rdy[#rdy + 1] = seq
    rdy[#rdy + 1] = id
  end
  redis.call('PEXPIRE', mk, ttl)
  if #subs > 0 then record_deliveries(subs, now, id, ttl, body, e) end
  ids[#ids + 1] = seq
  ids[#ids + 1] = id
  exps[#exps + 1] = e
  exps[#exps + 1] = id
  if e > maxe then maxe = e end
end
redis.call('ZADD', IDS, unpack(ids))
redis.call('ZADD', EXP, unpack(exps))
if #rdy > 0 then redis.call('ZADD', RDY, unpack(rdy)) end
if #dly > 0 then redis.call('ZADD', DLY, unpack(dly)) end
keepalive(P, now, maxe, IDS, EXP, RDY, DLY)
return {0}
