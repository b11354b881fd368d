-- KEYS: project index. ARGV: marker, limit, name filter, detailed ("1"),
-- project's scope prefix. Returns {cursor, name, metadata JSON or "", ...}:
-- cursor is the last name looked at when the scan budget ran out before the
-- page was full and before the end of the index ("" otherwise), so the
-- caller can continue a filtered listing from there.
local start = ARGV[1] == '' and '-' or ('(' .. ARGV[1])
local limit, filter, detailed, prefix = tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1', ARGV[5]
local out, scanned, last, done = {''}, 0, '', false
while #out - 1 < limit * 2 and scanned < 10000 do
  local names = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, 100)
  if #names == 0 then done = true break end
  for _, n in ipairs(names) do
    start = '(' .. n
    last = n
    scanned = scanned + 1
    if filter == '' or string.find(n, filter, 1, true) then
      out[#out + 1] = n
      if detailed then
        out[#out + 1] = redis.call('HGET', prefix .. string.len(n) .. ':' .. n .. '}:q', 'm') or '{}'
      else
        out[#out + 1] = ''
      end
      if #out - 1 == limit * 2 then break end
    end
  end
end
if not done and #out - 1 < limit * 2 then out[1] = last end
return out
