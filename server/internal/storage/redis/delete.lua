-- KEYS: scope. ARGV: now, id, claim id ("" for none).
-- Returns {lapsed claims, status}: 0 deleted or absent, 1 claimed and no
-- claim id given (Forbidden), 2 claim id does not hold it (Invalid).
local now, id, cid = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local lapsed = advance(now)
local h = redis.call('HMGET', mkey(id), 'e', 'k', 'x')
if not h[1] or tonumber(h[1]) <= now then return {lapsed, 0} end
local holder = ''
if h[2] and tonumber(h[3]) > now then holder = h[2] end
if holder ~= cid then
  if cid == '' then return {lapsed, 1} end
  return {lapsed, 2}
end
drop(id)
return {lapsed, 0}
