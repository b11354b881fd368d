-- KEYS: scope. ARGV: now, claim id. Read-only.
-- Returns {} for an absent or lapsed claim, else {ttl ms, created ms,
-- messages it still holds...}.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local c = claim_read(cid)
if not c then
  local target, answer = move_state(now)
  return answer or whereabouts(cid, target) or {}
end
if tonumber(c[4]) <= now then return {} end
incarnation()
local out = {c[1], c[3]}
for _, id in ipairs(split(c[5])) do
  local m = find(id, now)
  if m and m[7] == cid then out[#out + 1] = m end
end
return out
