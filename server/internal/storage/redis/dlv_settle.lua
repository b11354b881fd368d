-- KEYS: scope. ARGV: mode (ack, retry, release, fail), now, message id,
-- subscription id, lease token, next attempt (retry, release), error text.
-- Ack and fail remove the delivery and count it; retry (one more attempt,
-- its error recorded) and release (no attempt) reschedule it, only while
-- the lease token still holds it. Returns 1 when it acted.
local mode, now, mid, sid = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local dk = mid .. '.' .. sid
local dp = dpkey(sid)
if not redis.call('ZSCORE', dp, mid) then return 0 end
local live = redis.call('EXISTS', skey(sid)) == 1
if mode == 'retry' or mode == 'release' then
  local a = redis.call('HGET', DA, dk) or '0|'
  local attempts, tok = string.match(a, '^(%d+)|(.*)$')
  if tok ~= ARGV[5] then return 0 end
  if mode == 'release' then
    redis.call('HSET', DA, dk, attempts .. '|')
    redis.call('ZADD', DUE, tonumber(ARGV[6]), duemember(mid, sid))
    return 1
  end
  redis.call('HSET', DA, dk, (tonumber(attempts) + 1) .. '|')
  redis.call('ZADD', DUE, tonumber(ARGV[6]), duemember(mid, sid))
  redis.call('HSET', DS, 'e', ARGV[7], 't', now)
  if live then redis.call('HSET', DS, 'e:' .. sid, ARGV[7], 't:' .. sid, now) end
  return 1
end
redis.call('ZREM', dp, mid)
redis.call('ZREM', DUE, duemember(mid, sid))
redis.call('HDEL', DA, dk)
unref(mid)
local c = 'd'
if mode == 'fail' then c = 'f' end
redis.call('HINCRBY', DS, c, 1)
if live then redis.call('HINCRBY', DS, c .. ':' .. sid, 1) end
if mode == 'fail' then
  redis.call('HSET', DS, 'e', ARGV[7], 't', now)
  if live then redis.call('HSET', DS, 'e:' .. sid, ARGV[7], 't:' .. sid, now) end
end
return 1
