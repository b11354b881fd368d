-- KEYS: scope. ARGV: now, limit. Removes and returns the oldest free,
-- visible messages; Moving instead of none while a move has a batch in
-- transit (lib.lua's busy). Returns {lapsed claims, messages...}.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local answer, transit = busy(now)
if answer then return answer end
local out = {advance(now)}
while #out <= limit do
  local ids = redis.call('ZRANGE', RDY, 0, limit - #out)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local m = load(id, now)
    if m then out[#out + 1] = m end
    drop(id)
  end
end
if transit and #out == 1 then return moving_reply() end
return out
