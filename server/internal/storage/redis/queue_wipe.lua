-- One step of wiping a queue (purge or delete): drops up to ARGV[3] of its
-- messages posted up to sequence number ARGV[2] ('' on the first step:
-- the newest one now, returned for the next steps), so that the shard
-- serves its other clients between steps; queue_delete.lua then removes
-- what is left at once. KEYS: scope. ARGV: now, bound or '', step size.
-- Returns {bound, messages dropped}.
local _, answer = move_state(tonumber(ARGV[1]))
if answer then return answer end
local bound = ARGV[2]
if bound == '' then
  local newest = redis.call('ZRANGE', IDS, -1, -1, 'WITHSCORES')
  if #newest == 0 then return {'0', 0} end
  bound = newest[2]
end
local ids = redis.call('ZRANGEBYSCORE', IDS, '-inf', bound, 'LIMIT', 0, tonumber(ARGV[3]))
if #ids == 0 then return {bound, 0} end
local keys = {}
for i, id in ipairs(ids) do keys[i] = mkey(id) end
redis.call('DEL', unpack(keys))
for _, index in ipairs({IDS, EXP, RDY, DLY, HELD}) do
  redis.call('ZREM', index, unpack(ids))
end
return {bound, #ids}
