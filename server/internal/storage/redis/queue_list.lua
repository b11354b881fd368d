-- KEYS: project index. ARGV: marker, limit, name filter, detailed ("1"),
-- project's scope prefix. Returns {name, metadata JSON or "", ...}.
local start = ARGV[1] == '' and '-' or ('(' .. ARGV[1])
local limit, filter, detailed, prefix = tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1', ARGV[5]
local out, scanned = {}, 0
while #out < limit * 2 and scanned < 10000 do
  local names = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, 100)
  if #names == 0 then break end
  for _, n in ipairs(names) do
    start = '(' .. n
    scanned = scanned + 1
    if filter == '' or string.find(n, filter, 1, true) then
      out[#out + 1] = n
      if detailed then
        out[#out + 1] = redis.call('HGET', prefix .. string.len(n) .. ':' .. n .. '}:q', 'm') or '{}'
      else
        out[#out + 1] = ''
      end
      if #out == limit * 2 then break end
    end
  end
end
return out
