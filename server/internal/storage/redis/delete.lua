-- KEYS: scope. ARGV: now, then one or more deletes, each: id, claim id (""
-- for none). Concurrent deletes on one queue arrive here as one call
-- (groupcommit.go) and are done in the order they were asked for.
-- Deleting is the hottest call after posting (once per consumed message),
-- so it skips the cleanup pass (claims, pops and stats run it) and removes
-- a claimed message only from the indexes it can be in.
-- Returns one reply per delete: {0, status, removed}: status 0 deleted or
-- absent, 1 claimed and no claim id given (Forbidden), 2 claim id does not
-- hold it (Invalid); removed is 1 when this call deleted the message
-- (storage.Remover). Or, for an absent message of a queue that moves, the
-- answer about its whereabouts.
local now = tonumber(ARGV[1])

local function delete(id, cid)
  local h = redis.call('HMGET', mkey(id), 'e', 'k', 'x')
  if not h[1] then
    local target, answer = move_state(now)
    return answer or whereabouts(id, target) or {0, 0}
  end
  if tonumber(h[1]) <= now then return {0, 0} end
  local holder = ''
  if h[2] and tonumber(h[3]) > now then holder = h[2] end
  if holder ~= cid then
    if cid == '' then return {0, 1} end
    return {0, 2}
  end
  if holder ~= '' then
    -- Held by a live claim: not in the free or delayed indexes.
    redis.call('DEL', mkey(id))
    redis.call('ZREM', IDS, id)
    redis.call('ZREM', EXP, id)
    redis.call('ZREM', HELD, id)
  else
    drop(id)
  end
  return {0, 0, 1}
end

local replies = {}
for i = 2, #ARGV, 2 do
  replies[#replies + 1] = delete(ARGV[i], ARGV[i + 1])
end
return replies
