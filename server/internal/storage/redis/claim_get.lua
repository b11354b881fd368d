-- KEYS: scope. ARGV: now, claim id. Read-only.
-- Returns {} for an absent or lapsed claim, else {ttl ms, created ms,
-- messages it still holds...}.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local h = redis.call('HMGET', ckey(cid), 't', 'c', 'e', 'i')
if not h[1] then
  local target, answer = move_state(now)
  return answer or whereabouts(cid, target) or {}
end
if tonumber(h[3]) <= now then return {} end
incarnation()
local out = {h[1], h[2]}
for _, id in ipairs(split(h[4])) do
  local m = find(id, now)
  if m and m[7] == cid then out[#out + 1] = m end
end
return out
