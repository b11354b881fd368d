-- KEYS: scope. ARGV: pairs of subscription id, message id. Read-only.
-- Returns, for each pair still a pending delivery, {message id,
-- subscription id, body, ttl, created, expiry, attempts, due}: due is its
-- score in the due index (its next attempt, or its lease's end).
local out = {}
for i = 1, #ARGV, 2 do
  local sid, mid = ARGV[i], ARGV[i + 1]
  if redis.call('ZSCORE', dpkey(sid), mid) then
    local n = redis.call('HMGET', nkey(mid), 'b', 't', 'c', 'e')
    local due = redis.call('ZSCORE', DUE, duemember(mid, sid))
    if n[1] and due then
      local a = redis.call('HGET', DA, mid .. '.' .. sid)
      local attempts = 0
      if a then attempts = tonumber(string.match(a, '^(%d+)')) end
      out[#out + 1] = {mid, sid, n[1], n[2], n[3], n[4], attempts, due}
    end
  end
end
return out
