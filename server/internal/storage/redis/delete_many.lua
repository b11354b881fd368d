-- KEYS: scope. ARGV: now, claim id ("" for none), ids...
-- Deletes the messages no live claim holds, or that claim id holds.
-- Returns {lapsed claims}.
-- While the queue moves, nothing is deleted when any id is in transit, and
-- ids that moved are the target's: the answer is Moved after the rest went.
local now, cid = tonumber(ARGV[1]), ARGV[2]
local target, answer = move_state(now)
if answer then return answer end
local moved = false
if target then
  for i = 3, #ARGV do
    local w, moving = whereabouts(ARGV[i], target)
    if moving then return w end
    if w then moved = true end
  end
end
local lapsed = advance(now)
-- Entries of the stream area above the cursor are free: they go whatever
-- the claim id; one a claim holds in place goes as a claimed message hash
-- does.
incarnation()
local entries, unkept, unheld = {}, {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', mkey(id), 'k', 'x', 'e')
  local seq = not h[3] and xseq(id)
  if seq then
    local k = xclaim(seq, id, now)
    if k == '' or (cid ~= '' and k == cid) then
      entries[#entries + 1] = digits(seq)
      if seq <= XR then unkept[#unkept + 1], unheld[#unheld + 1] = digits(seq), id end
    end
  elseif not h[1] or h[1] == '' or tonumber(h[2]) <= now or (cid ~= '' and h[1] == cid) then
    drop(id)
  end
end
xdrop(entries)
if #unkept > 0 then
  redis.call('HDEL', K, unpack(unkept))
  redis.call('ZREM', HELD, unpack(unheld))
end
if moved then return moved_reply(target) end
return {lapsed}
