-- KEYS: scope, project index, registry. ARGV: metadata JSON, name, scope, now.
local _, answer = move_state(tonumber(ARGV[4]))
if answer then return answer end
if ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[1]) == 0 then
  redis.call('HSET', Q, 'm', ARGV[1])
end
return 1
