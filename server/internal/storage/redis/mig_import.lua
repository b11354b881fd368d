-- KEYS: scope, project index, registry. ARGV: now, name, scope, message
-- count, claim count, then per message id, body, created, expires, delay,
-- client, claim id, claim expiry, claim count, seq, then per claim id, ttl,
-- grace, created, expires (as mig_take.lua replies).
-- Stores the messages at their own seq with every attribute, and the live
-- claims. Every id is noted in :im first: an id imported before is never
-- stored again, even when it was deleted since. Expired messages and
-- lapsed claims are noted but not stored. Returns 1.
-- Per message it makes only the calls that store it (HSET, PEXPIRE, the
-- EXISTS guard); :im is read and written, and the indexes written, once
-- per chunk of ids: every call from Lua costs more than the work it does.
local now, nm, nc = tonumber(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[5])
ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], '{}')
local cbase = 5 + nm * 10

-- fresh returns, for the ids at ARGV offsets first + i*step (i < count),
-- which were never imported, and notes them all as imported.
local function fresh(first, count, step)
  local out, ids = {}, {}
  for i = 0, count - 1 do ids[i + 1] = ARGV[first + i * step] end
  for i = 1, #ids, 1000 do
    local chunk = {unpack(ids, i, math.min(i + 999, #ids))}
    local seen = redis.call('SMISMEMBER', IM, unpack(chunk))
    for j = 1, #chunk do out[i + j - 1] = seen[j] == 0 end
    redis.call('SADD', IM, unpack(chunk))
  end
  return out
end

local claims = {}
local newc = fresh(cbase + 1, nc, 5)
for j = 0, nc - 1 do
  local k = cbase + j * 5
  if newc[j + 1] and tonumber(ARGV[k + 5]) > now then claims[ARGV[k + 1]] = {k, {}} end
end
local maxe, top = 0, tonumber(redis.call('HGET', Q, 's') or '0')
local ids, exps, rdy, dly, held = {}, {}, {}, {}, {}
local newm = fresh(6, nm, 10)
for i = 0, nm - 1 do
  local k = 5 + i * 10
  local id, e, seq = ARGV[k + 1], tonumber(ARGV[k + 4]), tonumber(ARGV[k + 10])
  local mk = mkey(id)
  if newm[i + 1] and e > now and redis.call('EXISTS', mk) == 0 then
    local d, n, cid = tonumber(ARGV[k + 5]), tonumber(ARGV[k + 9]), ARGV[k + 7]
    local fields = {'b', ARGV[k + 2], 'c', ARGV[k + 3], 'e', ARGV[k + 4], 's', ARGV[k + 10], 'u', ARGV[k + 6]}
    if d > 0 then fields[#fields + 1], fields[#fields + 2] = 'd', ARGV[k + 5] end
    if n > 0 then fields[#fields + 1], fields[#fields + 2] = 'n', ARGV[k + 9] end
    local c = claims[cid]
    if c then
      fields[#fields + 1], fields[#fields + 2] = 'k', cid
      fields[#fields + 1], fields[#fields + 2] = 'x', ARGV[k + 8]
      held[#held + 1], held[#held + 2] = ARGV[k + 8], id
      c[2][#c[2] + 1] = id
    elseif d > now then
      dly[#dly + 1], dly[#dly + 2] = ARGV[k + 5], id
    else
      rdy[#rdy + 1], rdy[#rdy + 2] = ARGV[k + 10], id
    end
    redis.call('HSET', mk, unpack(fields))
    redis.call('PEXPIRE', mk, e - now)
    ids[#ids + 1], ids[#ids + 2] = ARGV[k + 10], id
    exps[#exps + 1], exps[#exps + 2] = ARGV[k + 4], id
    if e > maxe then maxe = e end
    if seq > top then top = seq end
  end
end
local created = absent(IDS, EXP, RDY, DLY, HELD, CL, CH)
for _, z in ipairs({{IDS, ids}, {EXP, exps}, {RDY, rdy}, {DLY, dly}, {HELD, held}}) do
  if #z[2] > 0 then zchunks('ZADD', z[1], z[2]) end
end
for cid, c in pairs(claims) do
  if #c[2] > 0 then
    local k = c[1]
    redis.call('HSET', CH, cid, claim_value(ARGV[k + 2], ARGV[k + 3], ARGV[k + 4], ARGV[k + 5], table.concat(c[2], ' ')))
    redis.call('ZADD', CL, ARGV[k + 5], cid)
  end
end
redis.call('HSET', Q, 's', string.format('%.0f', top))
if maxe > 0 then keepalive(P, now, maxe, created) end
return 1
