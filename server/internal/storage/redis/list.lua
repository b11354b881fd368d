-- KEYS: scope. ARGV: now, marker seq or message id, limit, client id, echo, include
-- claimed, include delayed (flags "1"/"0"). Read-only: filters by time.
-- Returns {next marker or "", messages...}. The next marker is set when the
-- page is full or when the scan budget ran out before the end of the queue.
local now, last, limit, client = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local target, answer = move_state(now)
if answer then return answer end
local echo, claimed, delayed = ARGV[5] == '1', ARGV[6] == '1', ARGV[7] == '1'
incarnation()
-- What this backend holds in order: :ids and the stream area merged by
-- seq, then, while a move has a batch in transit, the batch (:ti, scored
-- by the same sequence numbers). Take takes the newest, so the batch sorts
-- after everything left; a listing that stopped short of it would send a
-- caller going on to the target past it.
-- A message id marker resumes after that message, or from the start when it
-- is gone (Zaqar's marker form).
if not tonumber(last) then
  local at = redis.call('ZSCORE', IDS, last)
  if not at and target then at = redis.call('ZSCORE', TI, last) end
  if not at then
    local seq = xseq(last)
    if seq and xread(seq) then at = digits(seq) end
  end
  last = at or '0'
end

-- page returns up to n items after last, in order: {message, seq} with
-- the message in load's form or nil when it is gone or expired.
local function page(part, n)
  local out = {}
  if part == 2 then
    local ids = redis.call('ZRANGEBYSCORE', TI, '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, n)
    for i = 1, #ids, 2 do out[#out + 1] = {load(ids[i], now, tkey), ids[i + 1]} end
    return out
  end
  local ids = redis.call('ZRANGEBYSCORE', IDS, '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, n)
  local xs = redis.call('XRANGE', X, '(' .. last .. '-0', '+', 'COUNT', n)
  for _, it in ipairs(merged(ids, xs, n, false)) do
    local m, f = nil, it[3]
    if it[1] then
      m = load(it[1], now)
    elseif tonumber(f.e) > now then
      m = xmsg(it[2], f, xclaim(it[2], xid(INC, it[2]), now))
    end
    out[#out + 1] = {m, digits(it[2])}
  end
  return out
end

local out, scanned, done, part = {''}, 0, false, 1
while #out <= limit and not done do
  if scanned >= BUDGET * 2 then break end
  local items = page(part, limit + 1)
  if #items == 0 then
    if part == 2 or not target then done = true break end
    part = 2
  end
  for _, it in ipairs(items) do
    last = it[2]
    scanned = scanned + 1
    local m = it[1]
    if m and (echo or m[6] ~= client) and (claimed or m[7] == '') and (delayed or tonumber(m[5]) <= now) then
      out[#out + 1] = m
      if #out > limit then break end
    end
  end
end
if not done then out[1] = last end
return out
