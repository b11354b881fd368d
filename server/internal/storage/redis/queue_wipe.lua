-- One step of wiping a queue (purge or delete): drops up to ARGV[3] of its
-- messages posted up to sequence number ARGV[2] ('' on the first step:
-- the newest one now, returned for the next steps), so that the shard
-- serves its other clients between steps; queue_delete.lua then removes
-- what is left at once. KEYS: scope. ARGV: now, bound or '', step size.
-- Returns {bound, messages dropped}.
local _, answer = move_state(tonumber(ARGV[1]))
if answer then return answer end
-- Both areas (lib.lua, "The stream area") count towards the step.
local bound, step = ARGV[2], tonumber(ARGV[3])
if bound == '' then
  local newest = redis.call('ZRANGE', IDS, -1, -1, 'WITHSCORES')
  local top = tonumber(newest[2] or '0')
  local xtop = redis.call('XREVRANGE', X, '+', '-', 'COUNT', 1)
  if #xtop > 0 then top = math.max(top, entry_seq(xtop[1][1])) end
  if top == 0 then return {'0', 0} end
  bound = digits(top)
end
local ids = redis.call('ZRANGEBYSCORE', IDS, '-inf', bound, 'LIMIT', 0, step)
if #ids > 0 then
  local keys = {}
  for i, id in ipairs(ids) do keys[i] = mkey(id) end
  redis.call('DEL', unpack(keys))
  for _, index in ipairs({IDS, EXP, RDY, DLY, HELD}) do
    redis.call('ZREM', index, unpack(ids))
  end
end
local seqs = {}
if #ids < step then
  -- Entries a claim holds in place take their :k and :held entries along.
  incarnation()
  local kept, held = {}, {}
  for i, e in ipairs(redis.call('XRANGE', X, '-', bound .. '-0', 'COUNT', step - #ids)) do
    seqs[i] = e[1]:sub(1, -3)
    local seq = entry_seq(e[1])
    if seq <= XR then kept[#kept + 1], held[#held + 1] = seqs[i], xid(INC, seq) end
  end
  xdrop(seqs)
  if #kept > 0 then
    redis.call('HDEL', K, unpack(kept))
    redis.call('ZREM', HELD, unpack(held))
  end
end
return {bound, #ids + #seqs}
