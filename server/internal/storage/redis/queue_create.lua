-- KEYS: scope, project index, registry. ARGV: metadata JSON, name, scope, now.
local _, answer = move_state(tonumber(ARGV[4]))
if answer then return answer end
-- Returns 1 when the queue was created, 0 when it existed (left as it is).
return ensure(Q, KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[1])
