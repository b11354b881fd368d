-- KEYS: scope. Removes the seal unless a batch was taken.
-- Returns 1.
local f = redis.call('HMGET', Q, 'g', 't', 'z')
if not f[1] then return 1 end
if f[2] or f[3] then return conflict_reply('messages were taken; the move can only go forward') end
redis.call('HDEL', Q, 'g', 'gs', 'gm', 'ge')
return 1
