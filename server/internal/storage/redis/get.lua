-- KEYS: scope. ARGV: now, ids... Read-only. Returns the live messages
-- among ids, in the order asked, skipping unknown and expired ones.
local now = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local m = load(ARGV[i], now)
  if m then out[#out + 1] = m end
end
return out
