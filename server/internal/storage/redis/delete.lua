-- KEYS: scope. ARGV: now, then one or more deletes, each: id, claim id (""
-- for none). Concurrent deletes on one queue arrive here as one call
-- (groupcommit.go) and are done in the order they were asked for.
-- Deleting is the hottest call after posting (once per consumed message),
-- so it skips the cleanup pass (claims, pops and stats run it), removes a
-- claimed message only from the indexes it can be in, and removes all the
-- messages of a merged call with one command per index.
-- Returns one reply per delete: {0, status, removed}: status 0 deleted or
-- absent, 1 claimed and no claim id given (Forbidden), 2 claim id does not
-- hold it (Invalid); removed is 1 when this call deleted the message
-- (storage.Remover). Or, for an absent message of a queue that moves, the
-- answer about its whereabouts.
local now = tonumber(ARGV[1])

-- What the deletes remove is removed together at the end, one command per
-- key kind for all of them: removed lists every message deleted, free those
-- no live claim held (which may also be in :rdy or :dly; a held one is in
-- :ids, :exp and :held only); gone marks them, so a second delete of one id
-- in this call finds it absent.
-- entries lists the seqs of stream entries deleted, unheld the ids and
-- seqs of those a claim held in place (lib.lua, "The stream area").
local removed, free, gone, entries, unheld, unkept = {}, {}, {}, {}, {}, {}

-- Entries a claim holds in place are found for the whole call at once:
-- the ids at or below the cursor, their claim ids (:k) and claim expiries
-- (:held), one command each.
incarnation()
local holder, until_ = {}, {}
do
  local ids, seqs = {}, {}
  for i = 2, #ARGV, 2 do
    local seq = xseq(ARGV[i])
    if seq and seq <= XR then
      ids[#ids + 1], seqs[#seqs + 1] = ARGV[i], digits(seq)
    end
  end
  if #ids > 0 then
    local ks = redis.call('HMGET', K, unpack(seqs))
    local xs = redis.call('ZMSCORE', HELD, unpack(ids))
    for i, id in ipairs(ids) do
      if ks[i] then holder[id], until_[id] = {ks[i], seqs[i]}, xs[i] end
    end
  end
end

-- refusal is the reply to a delete with claim id cid of a live message
-- that holder's live claim holds ('': none), or nil when it may go.
local function refusal(holder, cid)
  if holder == cid then return nil end
  if cid == '' then return {0, 1} end
  if holder == '' then return {0, 3} end
  -- Another live claim's id: the message is someone else's (403).
  local e = redis.call('ZSCORE', CL, cid)
  if e and tonumber(e) > now then return {0, 1} end
  return {0, 2}
end

-- kept deletes the entry held in place for id: by claim k (its seq ks)
-- until x.
local function kept(id, cid, k, ks, x)
  if not (x and tonumber(x) > now) then
    -- Its claim lapsed: the message is free, if it still lives.
    local f = xread(tonumber(ks))
    if not f or tonumber(f.e) <= now then return {0, 0} end
    k = ''
  end
  local no = refusal(k, cid)
  if no then return no end
  entries[#entries + 1] = ks
  unkept[#unkept + 1] = ks
  unheld[#unheld + 1] = id
  gone[id] = true
  return {0, 0, 1}
end

local function delete(id, cid)
  if gone[id] then return {0, 0} end
  local hk = holder[id]
  if hk then return kept(id, cid, hk[1], hk[2], until_[id]) end
  local h = redis.call('HMGET', mkey(id), 'e', 'k', 'x')
  if not h[1] then
    local seq = xseq(id)
    local f = seq and xread(seq)
    if f then
      if tonumber(f.e) <= now then return {0, 0} end
      if cid ~= '' then return {0, 3} end
      entries[#entries + 1] = digits(seq)
      gone[id] = true
      return {0, 0, 1}
    end
    local target, answer = move_state(now)
    return answer or whereabouts(id, target) or {0, 0}
  end
  if tonumber(h[1]) <= now then return {0, 0} end
  local holder = ''
  if h[2] and tonumber(h[3]) > now then holder = h[2] end
  local no = refusal(holder, cid)
  if no then return no end
  removed[#removed + 1] = id
  if holder == '' then free[#free + 1] = id end
  gone[id] = true
  return {0, 0, 1}
end

local replies = {}
for i = 2, #ARGV, 2 do
  replies[#replies + 1] = delete(ARGV[i], ARGV[i + 1])
end
if #removed > 0 then
  local keys = {}
  for i, id in ipairs(removed) do keys[i] = mkey(id) end
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', IDS, unpack(removed))
  redis.call('ZREM', EXP, unpack(removed))
  redis.call('ZREM', HELD, unpack(removed))
end
if #free > 0 then
  redis.call('ZREM', RDY, unpack(free))
  redis.call('ZREM', DLY, unpack(free))
end
xdrop(entries)
if #unkept > 0 then
  redis.call('HDEL', K, unpack(unkept))
  redis.call('ZREM', HELD, unpack(unheld))
end
return replies
