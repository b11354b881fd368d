-- KEYS: scope. ARGV: now. Returns {delivered, failed, last error, last
-- error time, then per live subscription {id, subscriber, pending,
-- delivered, failed, last error, last error time}}. Pending counts the
-- deliveries whose message has not expired: exact at the given time.
local now = tonumber(ARGV[1])
sweep_subs(now)
local tot = redis.call('HMGET', DS, 'd', 'f', 'e', 't')
local out = {tot[1] or '0', tot[2] or '0', tot[3] or '', tot[4] or '0'}
local ids = redis.call('ZRANGE', SI, 0, -1)
for _, sid in ipairs(ids) do
  local c = redis.call('HMGET', DS, 'd:' .. sid, 'f:' .. sid, 'e:' .. sid, 't:' .. sid)
  local pending = redis.call('ZCOUNT', dpkey(sid), '(' .. now, '+inf')
  out[#out + 1] = {sid, redis.call('HGET', skey(sid), 's') or '', pending, c[1] or '0', c[2] or '0', c[3] or '', c[4] or '0'}
end
return out
