-- KEYS: scope. ARGV: now, marker ("" for the start), limit. Returns up to
-- limit live subscriptions after the marker, by id, as {id, subscriber,
-- ttl, options, expiry, confirmed, needs confirmation}.
local now = tonumber(ARGV[1])
sweep_subs(now)
local from = '-'
if ARGV[2] ~= '' then from = '(' .. ARGV[2] end
local ids = redis.call('ZRANGEBYLEX', SI, from, '+', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local h = redis.call('HMGET', skey(id), 's', 't', 'o', 'e', 'c', 'n')
  if h[1] and tonumber(h[4]) > now then
    out[#out + 1] = {id, h[1], h[2], h[3], h[4], h[5], h[6]}
  end
end
return out
