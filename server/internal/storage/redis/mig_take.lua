-- KEYS: scope. ARGV: now, limit.
-- Takes the newest limit live messages, every claim holding any of them
-- and, so that what stays sorts before everything moved, every message
-- from such a claim's oldest one on, out of the queue into transit (:tr,
-- :ti) in this one step. While a batch is in transit it returns that batch.
-- Returns the batch as JSON {"m": [[id, body, created, expires, delay,
-- client, claim id, claim expiry, claim count, seq]...], "c": [[id, ttl,
-- grace, created, expires]...]} (every value a string), or "" when the
-- queue has nothing left.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local f = redis.call('HMGET', Q, 'g', 'z')
if not f[1] or f[2] then return conflict_reply('the queue is not sealed') end
local tr = redis.call('GET', TR)
if tr then return tr end
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
        cls[#cls + 1] = {cid, c[1] or '0', c[2] or '0', c[3] or '0', c[4] or '0'}
        for _, held in ipairs(split(c[5])) do
          local s = redis.call('ZSCORE', IDS, held)
          if s and redis.call('HGET', mkey(held), 'k') == cid and (not lowest or tonumber(s) < lowest) then
            lowest = tonumber(s)
          end
        end
      end
    end
  end
  start = start + 100
end
if #msgs == 0 then return '' end

local ids = {}
for _, m in ipairs(msgs) do
  drop(m[1])
  ids[#ids + 1] = m[1]
end
for _, c in ipairs(cls) do
  redis.call('DEL', ckey(c[1]))
  redis.call('ZREM', CL, c[1])
  ids[#ids + 1] = c[1]
end
local js = cjson.encode({m = msgs, c = cls})
redis.call('SET', TR, js)
for i = 1, #ids, 1000 do
  redis.call('SADD', TI, unpack(ids, i, math.min(i + 999, #ids)))
end
redis.call('HSET', Q, 't', '1')
return js
