-- KEYS: scope. ARGV: now.
-- Returns {lapsed claims, total, claimed, oldest or {}, newest or {}}.
local now = tonumber(ARGV[1])
local target, answer = move_state(now)
if answer then return answer end
local lapsed = advance(now)
-- Once the stream's head is trimmed every entry left is live (lib.lua,
-- "The stream area"), but for what a cut-short trim left.
xtrim(now)
incarnation()
local entries = redis.call('XLEN', X)
local total = redis.call('ZCOUNT', EXP, '(' .. now, '+inf') + entries
local claimed = redis.call('ZCOUNT', HELD, '(' .. now, '+inf')
-- first returns the oldest (or newest) live message of :ids, and its seq.
local function first(rev)
  local cmd = rev and 'ZREVRANGE' or 'ZRANGE'
  -- Small chunks: the first message is nearly always live.
  for start = 0, BUDGET, 4 do
    local ids = redis.call(cmd, IDS, start, start + 3, 'WITHSCORES')
    if #ids == 0 then break end
    for i = 1, #ids, 2 do
      local m = load(ids[i], now)
      if m then return m, tonumber(ids[i + 1]) end
    end
  end
  return nil, nil
end
-- xfirst is first for the stream area.
local function xfirst(rev)
  local seen = 0
  local bound = rev and '+' or '-'
  while seen <= BUDGET do
    local es
    if rev then
      es = redis.call('XREVRANGE', X, bound, '-', 'COUNT', 4)
    else
      es = redis.call('XRANGE', X, bound, '+', 'COUNT', 4)
    end
    if #es == 0 then break end
    for _, e in ipairs(es) do
      local f = fields(e[2])
      local seq = entry_seq(e[1])
      if tonumber(f.e) > now then return xmsg(seq, f, xclaim(seq, xid(INC, seq), now)), seq end
    end
    seen = seen + #es
    bound = '(' .. es[#es][1]
  end
  return nil, nil
end
-- ends returns the oldest (rev: newest) live message of both areas.
local function ends(rev)
  local m, s = first(rev)
  if entries > 0 then
    local xm, xs = xfirst(rev)
    if xm and (not s or (xs > s) == rev) then m = xm end
  end
  return m
end
local oldest, newest
if total > 0 then oldest, newest = ends(false), ends(true) end
-- A batch in transit counts here, after everything left, as listings show
-- it: a queue's depth does not dip while it moves. One read per message of
-- the batch, only while one is in transit.
if target then
  local ids = redis.call('ZRANGE', TI, 0, -1)
  for _, id in ipairs(ids) do
    local m = load(id, now, tkey)
    if m then
      total = total + 1
      if m[7] ~= '' then claimed = claimed + 1 end
      oldest = oldest or m
      newest = m
    end
  end
end
return {lapsed, total, claimed, oldest or {}, newest or {}}
