-- KEYS: scope. ARGV: now, limit. Removes and returns the oldest free,
-- visible messages; Moving instead of none while a move has a batch in
-- transit (lib.lua's busy). Returns {lapsed claims, messages...}.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local answer, transit = busy(now)
if answer then return answer end
local out = {advance(now)}
incarnation()
-- free_head takes message hashes out of :rdy, which go whole here, and
-- reads free entries, which go here too.
while #out <= limit do
  local items = free_head(limit - #out + 1)
  if #items == 0 then break end
  local entries = {}
  for _, it in ipairs(items) do
    if it[1] then
      local m = load(it[1], now)
      if m then out[#out + 1] = m end
      drop(it[1])
    else
      entries[#entries + 1] = digits(it[2])
      if tonumber(it[3].e) > now then out[#out + 1] = xmsg(it[2], it[3]) end
    end
  end
  xdrop(entries)
end
if transit and #out == 1 then return moving_reply() end
return out
