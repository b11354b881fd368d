-- KEYS: scope. ARGV: now, token, then the queue's delivered, failed, last
-- error, last error time, then 5 per subscription: id, delivered, failed,
-- last error, last error time. Adds the counts to the queue's (and to
-- each subscription live here) once per token; a last error replaces the
-- one here when it is later. Returns 1 when it added, 0 when the token
-- had added already.
local now, token = tonumber(ARGV[1]), ARGV[2]
if redis.call('HGET', DS, 'mv') == token then return 0 end
local function add(suffix, d, f, e, t)
  redis.call('HINCRBY', DS, 'd' .. suffix, d)
  redis.call('HINCRBY', DS, 'f' .. suffix, f)
  if tonumber(t) > tonumber(redis.call('HGET', DS, 't' .. suffix) or '0') then
    redis.call('HSET', DS, 'e' .. suffix, e, 't' .. suffix, t)
  end
end
add('', ARGV[3], ARGV[4], ARGV[5], ARGV[6])
for i = 7, #ARGV, 5 do
  local se = redis.call('ZSCORE', SX, ARGV[i])
  if se and tonumber(se) > now then
    add(':' .. ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
  end
end
redis.call('HSET', DS, 'mv', token)
return 1
