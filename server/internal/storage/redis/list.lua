-- KEYS: scope. ARGV: now, marker seq or message id, limit, client id, echo, include
-- claimed, include delayed (flags "1"/"0"). Read-only: filters by time.
-- Returns {next marker or "", messages...}. The next marker is set when the
-- page is full or when the scan budget ran out before the end of the queue.
local now, last, limit, client = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local _, answer = move_state(now)
if answer then return answer end
local echo, claimed, delayed = ARGV[5] == '1', ARGV[6] == '1', ARGV[7] == '1'
-- A message id marker resumes after that message, or from the start when it
-- is gone (Zaqar's marker form).
if not tonumber(last) then last = redis.call('ZSCORE', IDS, last) or '0' end
local out, scanned, done = {''}, 0, false
while #out <= limit and not done do
  if scanned >= BUDGET * 2 then break end
  local ids = redis.call('ZRANGEBYSCORE', IDS, '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
  if #ids == 0 then done = true break end
  for i = 1, #ids, 2 do
    last = ids[i + 1]
    scanned = scanned + 1
    local m = load(ids[i], now)
    if m and (echo or m[6] ~= client) and (claimed or m[7] == '') and (delayed or tonumber(m[5]) <= now) then
      out[#out + 1] = m
      if #out > limit then break end
    end
  end
end
if not done then out[1] = last end
return out
