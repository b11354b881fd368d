-- KEYS: scope, project index, registry. ARGV: name, scope, keep ("1":
-- purge, keeping the queue hash and its registrations), now.
local _, answer = move_state(tonumber(ARGV[4]))
if answer then return answer end
delete_all(IDS, mkey)
redis.call('DEL', IDS, EXP, RDY, DLY, CL, CH, HELD, X, XE, K)
if ARGV[3] == '1' then
  redis.call('HDEL', Q, 'h') -- the stream's expiry order starts afresh
else
  delete_all(TI, tkey)
  delete_all(TC, tckey)
  drop_all_subs()
  redis.call('DEL', Q, TI, TC, MV, IM)
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('SREM', KEYS[3], ARGV[2])
end
return 1
