-- One step of deleting subscriptions with a backlog: drops up to ARGV[2]
-- pending deliveries of subscription ARGV[1] ('': of every subscription
-- of the queue), so that the shard serves its other clients between
-- steps; sub_delete.lua or queue_delete.lua then removes the rest at once.
-- KEYS: scope. ARGV: id or '', step size. Returns {dropped, pending left}.
local step = tonumber(ARGV[2])
local ids = {ARGV[1]}
if ARGV[1] == '' then ids = redis.call('ZRANGE', SI, 0, -1) end
local left = step
for _, sid in ipairs(ids) do
  if left == 0 then break end
  left = left - drop_pending(sid, left)
end
local pending = 0
for _, sid in ipairs(ids) do pending = pending + redis.call('ZCARD', dpkey(sid)) end
return {step - left, pending}
