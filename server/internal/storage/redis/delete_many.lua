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
-- Entries of the stream area are free: they go whatever the claim id.
incarnation()
local entries = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', mkey(id), 'k', 'x')
  if not h[1] or h[1] == '' or tonumber(h[2]) <= now or (cid ~= '' and h[1] == cid) then
    drop(id)
  end
  if not h[1] then
    local seq = xseq(id)
    if seq then entries[#entries + 1] = digits(seq) end
  end
end
xdrop(entries)
if moved then return moved_reply(target) end
return {lapsed}
