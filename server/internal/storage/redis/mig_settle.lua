-- KEYS: scope. ARGV: the batch's message ids.
-- Ends the transit: its ids answer Moved from now on. Settling a batch
-- settled before changes nothing. Returns 1.
local tr = redis.call('GET', TR)
if not tr then return 1 end
for i = 1, #ARGV do
  if redis.call('SISMEMBER', TI, ARGV[i]) == 0 then
    return conflict_reply('the batch is not the one in transit')
  end
end
local ids = redis.call('SMEMBERS', TI)
for i = 1, #ids, 1000 do
  redis.call('SADD', MV, unpack(ids, i, math.min(i + 999, #ids)))
end
redis.call('DEL', TR, TI)
return 1
