-- KEYS: scope. ARGV: now.
-- Returns {lapsed claims, total, claimed, oldest or {}, newest or {}}.
local now = tonumber(ARGV[1])
local _, answer = move_state(now)
if answer then return answer end
local lapsed = advance(now)
local total = redis.call('ZCOUNT', EXP, '(' .. now, '+inf')
local claimed = redis.call('ZCOUNT', HELD, '(' .. now, '+inf')
local function first(rev)
  if total == 0 then return {} end
  local cmd = rev and 'ZREVRANGE' or 'ZRANGE'
  -- Small chunks: the first message is nearly always live.
  for start = 0, BUDGET, 4 do
    local ids = redis.call(cmd, IDS, start, start + 3)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local m = load(id, now)
      if m then return m end
    end
  end
  return {}
end
return {lapsed, total, claimed, first(false), first(true)}
