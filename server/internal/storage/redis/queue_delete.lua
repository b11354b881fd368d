-- KEYS: scope, project index, registry. ARGV: name, scope, keep ("1":
-- purge, keeping the queue hash and its registrations).
local function delete_all(zkey, keyof)
  local ids = redis.call('ZRANGE', zkey, 0, -1)
  for i = 1, #ids, 500 do
    local batch = {}
    for j = i, math.min(i + 499, #ids) do batch[#batch + 1] = keyof(ids[j]) end
    redis.call('DEL', unpack(batch))
  end
end
delete_all(IDS, mkey)
delete_all(CL, ckey)
redis.call('DEL', IDS, EXP, RDY, DLY, CL, HELD)
if ARGV[3] ~= '1' then
  drop_all_subs()
  redis.call('DEL', Q)
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('SREM', KEYS[3], ARGV[2])
end
return 1
