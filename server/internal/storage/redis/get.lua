-- KEYS: scope. ARGV: now, one ("1": a single get, which answers Moved for
-- a message that moved), ids... Read-only. Returns the live messages among
-- ids, in the order asked, skipping unknown and expired ones.
local now, one = tonumber(ARGV[1]), ARGV[2] == '1'
local target, answer = move_state(now)
if answer then return answer end
incarnation()
local out = {}
for i = 3, #ARGV do
  local m = find(ARGV[i], now)
  if m then
    out[#out + 1] = m
  elseif target then
    local w, moving = whereabouts(ARGV[i], target)
    if w and (one or moving) then return w end
  end
end
return out
