-- KEYS: scope, project index, registry. ARGV: name, scope, now, ttl ms.
-- Once every message moved, removes the queue and leaves a tombstone (the
-- queue hash with only g and z): until now + ttl every call answers
-- Moved(target). Finishing again changes nothing. Returns 1.
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call('HMGET', Q, 'g', 'z')
if not f[1] then return conflict_reply('the queue is not sealed') end
if f[2] then return 1 end
if redis.call('EXISTS', TI, TC) > 0 then return conflict_reply('a batch is in transit') end
advance(now)
-- Every live message was taken, so what the stream area holds has expired:
-- trim it all (a queue whose consumers stopped long ago may hold more than
-- one budget's worth), within a bound.
for _ = 1, 40 do
  if xtrim(now) then break end
end
if redis.call('ZCOUNT', EXP, '(' .. now, '+inf') > 0 or redis.call('XLEN', X) > 0 then
  return conflict_reply('messages are left to move')
end
delete_all(IDS, mkey)
drop_all_subs()
redis.call('DEL', IDS, EXP, RDY, DLY, CL, CH, HELD, Q, TI, TC, MV, IM, X, XE, K)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[2])
redis.call('HSET', Q, 'g', f[1], 'z', now + ttl)
redis.call('PEXPIRE', Q, ttl)
return 1
