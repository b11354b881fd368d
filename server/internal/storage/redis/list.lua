-- KEYS: scope. ARGV: now, marker seq or message id, limit, client id, echo, include
-- claimed, include delayed (flags "1"/"0"). Read-only: filters by time.
-- Returns {next marker or "", messages...}. The next marker is set when the
-- page is full or when the scan budget ran out before the end of the queue.
local now, last, limit, client = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local target, answer = move_state(now)
if answer then return answer end
local echo, claimed, delayed = ARGV[5] == '1', ARGV[6] == '1', ARGV[7] == '1'
-- What this backend holds in order: :ids, then, while a move has a batch in
-- transit, the batch (:ti, scored by the same sequence numbers). Take takes
-- the newest, so the batch sorts after everything left; a listing that
-- stopped short of it would send a caller going on to the target past it.
local parts = {{IDS, mkey}}
if target then parts[2] = {TI, tkey} end
-- A message id marker resumes after that message, or from the start when it
-- is gone (Zaqar's marker form).
if not tonumber(last) then
  local at
  for _, part in ipairs(parts) do at = at or redis.call('ZSCORE', part[1], last) end
  last = at or '0'
end
local out, scanned, done, part = {''}, 0, false, 1
while #out <= limit and not done do
  if scanned >= BUDGET * 2 then break end
  local ids = redis.call('ZRANGEBYSCORE', parts[part][1], '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
  if #ids == 0 then
    if part == #parts then done = true break end
    part = part + 1
  end
  for i = 1, #ids, 2 do
    last = ids[i + 1]
    scanned = scanned + 1
    local m = load(ids[i], now, parts[part][2])
    if m and (echo or m[6] ~= client) and (claimed or m[7] == '') and (delayed or tonumber(m[5]) <= now) then
      out[#out + 1] = m
      if #out > limit then break end
    end
  end
end
if not done then out[1] = last end
return out
