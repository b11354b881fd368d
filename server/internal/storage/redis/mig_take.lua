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

local picked, msgs, claims, cls = {}, {}, {}, {}
local lowest -- every message from this seq on must come
local start, stop = 0, false
while not stop do
  local page = redis.call('ZREVRANGE', IDS, start, start + 99, 'WITHSCORES')
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local id, seq = page[i], tonumber(page[i + 1])
    if #msgs >= limit and (not lowest or seq < lowest) then
      stop = true
      break
    end
    local m = load(id, now)
    if m and not picked[id] then
      picked[id] = true
      m[10] = page[i + 1]
      msgs[#msgs + 1] = m
      local cid = m[7]
      if cid ~= '' and not claims[cid] then
        claims[cid] = true
        local c = redis.call('HMGET', ckey(cid), 't', 'g', 'c', 'e', 'i')
        if c[4] then
          cls[#cls + 1] = {cid, c[1] or '0', c[2] or '0', c[3] or '0', c[4]}
          for _, held in ipairs(split(c[5])) do
            local s = redis.call('ZSCORE', IDS, held)
            if s and redis.call('HGET', mkey(held), 'k') == cid and (not lowest or tonumber(s) < lowest) then
              lowest = tonumber(s)
            end
          end
        end
      end
    end
  end
  start = start + 100
end
if #msgs == 0 then return {0, 0} end

local out, ids, ti = {#msgs, #cls}, {}, {}
for _, m in ipairs(msgs) do
  push(out, unpack(m))
  redis.call('RENAME', mkey(m[1]), tkey(m[1]))
  ids[#ids + 1] = m[1]
  ti[#ti + 1] = m[10]
  ti[#ti + 1] = m[1]
end
for _, key in ipairs({IDS, EXP, RDY, DLY, HELD}) do zchunks('ZREM', key, ids) end
zchunks('ZADD', TI, ti)
for _, c in ipairs(cls) do
  push(out, unpack(c))
  redis.call('RENAME', ckey(c[1]), tckey(c[1]))
  redis.call('ZREM', CL, c[1])
  redis.call('ZADD', TC, 0, c[1])
end
redis.call('HSET', Q, 't', '1')
return out
