-- KEYS: scope, project index, registry. ARGV: now, name, scope, message
-- count, claim count, then per message id, body, created, expires, delay,
-- client, claim id, claim expiry, claim count, seq, then per claim id, ttl,
-- grace, created, expires (as mig_take.lua replies).
-- Stores the messages at their own seq with every attribute, and the live
-- claims. Every id is noted in :im first: an id imported before is never
-- stored again, even when it was deleted since. Expired messages and
-- lapsed claims are noted but not stored. Returns 1.
local now, nm, nc = tonumber(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[5])
ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], '{}')
local cbase = 5 + nm * 10
local claims = {}
for j = 0, nc - 1 do
  local k = cbase + j * 5
  local cid = ARGV[k + 1]
  if redis.call('SADD', IM, cid) == 1 and tonumber(ARGV[k + 5]) > now then claims[cid] = {k, {}} end
end
local maxe, top = 0, tonumber(redis.call('HGET', Q, 's') or '0')
local ids, exps, rdy, dly, held = {}, {}, {}, {}, {}
for i = 0, nm - 1 do
  local k = 5 + i * 10
  local id, e, seq = ARGV[k + 1], tonumber(ARGV[k + 4]), tonumber(ARGV[k + 10])
  local mk = mkey(id)
  if redis.call('SADD', IM, id) == 1 and e > now and redis.call('EXISTS', mk) == 0 then
    local d, n, cid = tonumber(ARGV[k + 5]), tonumber(ARGV[k + 9]), ARGV[k + 7]
    local fields = {'b', ARGV[k + 2], 'c', ARGV[k + 3], 'e', ARGV[k + 4], 's', ARGV[k + 10], 'u', ARGV[k + 6]}
    if d > 0 then push(fields, 'd', ARGV[k + 5]) end
    if n > 0 then push(fields, 'n', ARGV[k + 9]) end
    local c = claims[cid]
    if c then
      push(fields, 'k', cid, 'x', ARGV[k + 8])
      push(held, ARGV[k + 8], id)
      c[2][#c[2] + 1] = id
    elseif d > now then
      push(dly, ARGV[k + 5], id)
    else
      push(rdy, ARGV[k + 10], id)
    end
    redis.call('HSET', mk, unpack(fields))
    redis.call('PEXPIRE', mk, e - now)
    push(ids, ARGV[k + 10], id)
    push(exps, ARGV[k + 4], id)
    if e > maxe then maxe = e end
    if seq > top then top = seq end
  end
end
for _, z in ipairs({{IDS, ids}, {EXP, exps}, {RDY, rdy}, {DLY, dly}, {HELD, held}}) do
  if #z[2] > 0 then zchunks('ZADD', z[1], z[2]) end
end
for cid, c in pairs(claims) do
  if #c[2] > 0 then
    local k = c[1]
    redis.call('HSET', ckey(cid), 't', ARGV[k + 2], 'g', ARGV[k + 3], 'c', ARGV[k + 4], 'e', ARGV[k + 5],
      'i', table.concat(c[2], ' '))
    redis.call('PEXPIRE', ckey(cid), tonumber(ARGV[k + 5]) - now)
    redis.call('ZADD', CL, ARGV[k + 5], cid)
  end
end
redis.call('HSET', Q, 's', string.format('%.0f', top))
if maxe > 0 then keepalive(P, now, maxe, IDS, EXP, RDY, DLY, HELD, CL) end
return 1
