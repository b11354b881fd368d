-- KEYS: scope. ARGV: now.
-- Returns {lapsed claims, total, claimed, oldest or {}, newest or {}}.
local now = tonumber(ARGV[1])
local target, answer = move_state(now)
if answer then return answer end
local lapsed = advance(now)
local total = redis.call('ZCOUNT', EXP, '(' .. now, '+inf')
local claimed = redis.call('ZCOUNT', HELD, '(' .. now, '+inf')
-- first returns the oldest (or newest) live message of zset z, whose
-- members' hashes keyof names.
local function first(z, keyof, rev)
  local cmd = rev and 'ZREVRANGE' or 'ZRANGE'
  -- Small chunks: the first message is nearly always live.
  for start = 0, BUDGET, 4 do
    local ids = redis.call(cmd, z, start, start + 3)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local m = load(id, now, keyof)
      if m then return m end
    end
  end
  return nil
end
local oldest, newest
if total > 0 then
  oldest, newest = first(IDS, mkey, false), first(IDS, mkey, true)
end
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
