-- KEYS: scope. ARGV: now, limit.
-- Takes the newest limit live messages, every claim holding any of them
-- and, so that what stays sorts before everything moved, every message
-- from such a claim's oldest one on, out of the queue into transit in this
-- one step: their hashes are renamed out of sight and their index entries
-- go (see lib.lua). While a batch is in transit it returns that batch.
-- Returns the batch as transit_reply (lib.lua) does; {0, 0} when the queue
-- has nothing left.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local f = redis.call('HMGET', Q, 'g', 'z')
if f[2] then return moved_reply(f[1]) end -- finished: a resumed mover goes on to the switch
if not f[1] then return conflict_reply('the queue is not sealed') end
if redis.call('EXISTS', TI, TC) > 0 then return transit_reply() end
advance(now)
incarnation()

-- The work is O(batch), not O(queue): it reads the index and the stream
-- area (merged by seq: lib.lua, "The stream area") from the newest end,
-- one page at a time, and each message once. The reply is written as
-- the messages are read (no table per message): this script holds Redis
-- for the whole batch, and every client of the server waits meanwhile.
local out, ids, ti, cls, claims = {0, 0}, {}, {}, {}, {}
local entries = {} -- {id, seq, fields} of the stream entries taken
local nm, n = 0, 2
local lowest -- every message from this seq on must come
local start, xupper, stop = 0, '+', false
local page_size = math.min(limit + 1, 500)

-- page returns the next page_size messages from the newest end: {id, seq
-- string} of a message hash, {nil, seq string, fields} of an entry.
local function page()
  local hp = redis.call('ZREVRANGE', IDS, start, start + page_size - 1, 'WITHSCORES')
  local xp = redis.call('XREVRANGE', X, xupper, '-', 'COUNT', page_size)
  local items = merged(hp, xp, page_size, true)
  for _, it in ipairs(items) do
    it[2] = digits(it[2])
    if it[1] then
      start = start + 1
    else
      xupper = '(' .. it[2] .. '-0'
    end
  end
  return items
end

-- bring takes claim k along (once), and lowers lowest to the oldest
-- message it still holds, in either area.
local function bring(k)
  if claims[k] then return end
  claims[k] = true
  local c = claim_read(k)
  if not c then return end
  cls[#cls + 1] = {k, c[1], c[2], c[3], c[4]}
  for _, held in ipairs(split(c[5])) do
    local hs = redis.call('ZSCORE', IDS, held)
    if hs then
      if redis.call('HGET', mkey(held), 'k') ~= k then hs = nil end
    else
      local xs = xseq(held)
      if xs and xs <= XR and redis.call('HGET', K, digits(xs)) == k then hs = xs end
    end
    if hs and (not lowest or tonumber(hs) < lowest) then lowest = tonumber(hs) end
  end
end

while not stop do
  local items = page()
  if #items == 0 then break end
  for _, it in ipairs(items) do
    local id, seq = it[1], it[2]
    local s = tonumber(seq)
    if nm >= limit and (not lowest or s < lowest) then
      stop = true
      break
    end
    local f = it[3]
    if f then
      if tonumber(f.e) > now then
        id = xid(INC, s)
        local k, x, cc = xclaim(s, id, now)
        out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, f.b, f.c, f.e, '0'
        out[n + 6], out[n + 7], out[n + 8], out[n + 9], out[n + 10] = f.u or '', k, x, cc, seq
        n = n + 10
        nm = nm + 1
        entries[#entries + 1] = {id, seq, f, k, x, cc}
        ti[#ti + 1], ti[#ti + 2] = seq, id
        if k ~= '' then bring(k) end
      end
    end
    -- As lib.lua's load: a lapsed claim reads as none.
    local h = f and {} or redis.call('HMGET', mkey(id), 'b', 'c', 'e', 'd', 'u', 'k', 'x', 'n')
    if h[1] and tonumber(h[3]) > now then
      local k, x = h[6] or '', h[7] or '0'
      if k ~= '' and tonumber(x) <= now then k, x = '', '0' end
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, h[1], h[2], h[3], h[4] or '0'
      out[n + 6], out[n + 7], out[n + 8], out[n + 9], out[n + 10] = h[5] or '', k, x, h[8] or '0', seq
      n = n + 10
      nm = nm + 1
      ids[#ids + 1] = id
      ti[#ti + 1], ti[#ti + 2] = seq, id
      if k ~= '' then bring(k) end
    end
  end
end
if nm == 0 then return {0, 0} end

out[1], out[2] = nm, #cls
for i = 1, #ids do redis.call('RENAME', mkey(ids[i]), tkey(ids[i])) end
for _, key in ipairs({IDS, EXP, RDY, DLY, HELD}) do
  if #ids > 0 then zchunks('ZREM', key, ids) end
end
-- An entry's transit record is the message hash it would have become
-- (lib.lua's xpromote); one a claim held in place takes its :k and :held
-- entries along.
local seqs, kept, unheld = {}, {}, {}
for i, e in ipairs(entries) do
  local f = e[3]
  local tk = tkey(e[1])
  redis.call('HSET', tk, 'b', f.b, 'c', f.c, 'e', f.e, 's', e[2], 'u', f.u or '')
  if e[4] ~= '' then redis.call('HSET', tk, 'k', e[4], 'x', e[5]) end
  if e[6] ~= '0' then redis.call('HSET', tk, 'n', e[6]) end
  redis.call('PEXPIRE', tk, digits(tonumber(f.e) - now))
  seqs[i] = e[2]
  if tonumber(e[2]) <= XR then kept[#kept + 1], unheld[#unheld + 1] = e[2], e[1] end
end
xdrop(seqs)
if #kept > 0 then
  zchunks('HDEL', K, kept)
  zchunks('ZREM', HELD, unheld)
end
zchunks('ZADD', TI, ti)
for _, c in ipairs(cls) do
  push(out, unpack(c))
  -- A claim's transit record lives as long as the claim.
  local tk = tckey(c[1])
  redis.call('HSET', tk, 't', c[2], 'g', c[3], 'c', c[4], 'e', c[5])
  redis.call('PEXPIRE', tk, digits(math.max(1, tonumber(c[5]) - now)))
  claim_drop(c[1])
  redis.call('ZADD', TC, 0, c[1])
end
redis.call('HSET', Q, 't', '1')
return out
