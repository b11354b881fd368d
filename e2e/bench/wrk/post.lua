-- POST BATCH (default 1) messages of MSG_SIZE (default 1024) bytes per
-- request to QUEUE. Anything but 201 counts as bad.
local c = dofile((os.getenv("WRK_LUA_DIR") or ".") .. "/common.lua")

local size = tonumber(os.getenv("MSG_SIZE") or "1024")
local batch = tonumber(os.getenv("BATCH") or "1")

c.headers()
c.pace()
wrk.method = "POST"
wrk.path = "/v2/queues/" .. c.queue .. "/messages"
wrk.body = c.post_body(size, batch)

setup = c.setup

function init(args)
  bad = 0
end

function response(status, headers, body)
  if status ~= 201 then bad = bad + 1 end
end

function done(summary, latency, requests)
  c.report(summary, latency, {"bad"})
end
