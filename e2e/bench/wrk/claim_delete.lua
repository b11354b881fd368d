-- The consumer cycle: claim one message (POST .../claims?limit=1), then
-- delete it with the claim_id from its href. wrk calls request() per
-- thread, not per connection, so each thread keeps a FIFO of claimed hrefs
-- and sends a DELETE whenever one is waiting, a claim otherwise. The queue
-- must be pre-filled; a claim answered 204 (nothing to claim) is counted
-- as "empty" so a drained queue is visible in the results.
local c = dofile((os.getenv("WRK_LUA_DIR") or ".") .. "/common.lua")

c.headers()
c.pace()
local claim_path = "/v2/queues/" .. c.queue .. "/claims?limit=1"
local claim_body = '{"ttl":60,"grace":60}'

setup = c.setup

-- The requests are built once per thread: the claim whole, a delete's
-- head after its request line (only the path differs between deletes).
-- wrk.format per request was a fifth of the client's instructions per
-- request, on a 2-core machine where wrk shares the cores with the server
-- it measures (docs/benchmarks.md, "The claim cell's client").
function init(args)
  pending = {}
  claims, claimed, deleted, bad = 0, 0, 0, 0
  claim_request = wrk.format("POST", claim_path, nil, claim_body)
  local d = wrk.format("DELETE", "/", nil, nil)
  local line_end = d:find("\r\n", 1, true)
  delete_rest = d:sub(line_end)
end

function request()
  local href = table.remove(pending, 1)
  if href then
    return "DELETE " .. href .. " HTTP/1.1" .. delete_rest
  end
  claims = claims + 1
  return claim_request
end

function response(status, headers, body)
  if status == 201 then
    local href = string.match(body, '"href"%s*:%s*"([^"]+)"')
    if href and string.find(href, "claim_id=", 1, true) then
      claimed = claimed + 1
      table.insert(pending, href)
    else
      bad = bad + 1
    end
  elseif status == 204 then
    -- Either a delete (expected) or an empty claim; told apart at the end
    -- as deleted = 204s - (claims - claimed - in flight).
    deleted = deleted + 1
  else
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  c.report(summary, latency, {"claims", "claimed", "deleted", "bad"})
end
