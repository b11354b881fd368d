-- KEYS: scope. ARGV: now, claim id ("" for none), ids...
-- Deletes the messages no live claim holds, or that claim id holds.
-- Returns {lapsed claims}.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local lapsed = advance(now)
for i = 3, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', mkey(id), 'k', 'x')
  if not h[1] or h[1] == '' or tonumber(h[2]) <= now or (cid ~= '' and h[1] == cid) then
    drop(id)
  end
end
return {lapsed}
