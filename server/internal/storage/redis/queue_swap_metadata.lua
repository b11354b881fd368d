-- KEYS: scope. ARGV: expected metadata JSON, new metadata JSON, now.
-- The compare-and-set step of a metadata update: returns -1 when the queue
-- does not exist, 0 when its metadata is no longer the expected text (a
-- concurrent write won; the caller reads again), 1 when replaced.
local _, answer = move_state(tonumber(ARGV[3]))
if answer then return answer end
local cur = redis.call('HGET', Q, 'm')
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
redis.call('HSET', Q, 'm', ARGV[2])
return 1
