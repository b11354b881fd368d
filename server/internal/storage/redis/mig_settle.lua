-- KEYS: scope. ARGV: the batch's message ids.
-- Ends the transit: its records go and its ids answer Moved from now on.
-- Settling a batch settled before changes nothing. Returns 1.
if redis.call('EXISTS', TI, TC) == 0 then return 1 end
-- One ZMSCORE per chunk of ids, not a ZSCORE per id (a call from Lua
-- costs more than the lookup).
for i = 1, #ARGV, 1000 do
  local scores = redis.call('ZMSCORE', TI, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  for j = 1, #scores do
    if not scores[j] then return conflict_reply('the batch is not the one in transit') end
  end
end
for _, z in ipairs({{TI, tkey}, {TC, tckey}}) do
  local ids = redis.call('ZRANGE', z[1], 0, -1)
  if #ids > 0 then
    delete_all(z[1], z[2])
    zchunks('SADD', MV, ids)
  end
end
redis.call('DEL', TI, TC)
return 1
