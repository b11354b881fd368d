-- Shared by the wrk scripts of make bench-server: Zaqar v2 headers, a
-- per-thread counter registry, and one machine-readable summary line.
local M = {}

M.queue = os.getenv("QUEUE") or "bench"
M.project = os.getenv("PROJECT") or "bench"

function M.headers()
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json"
  -- One Client-ID for the run: Zaqar requires it on every /v2 route.
  wrk.headers["Client-ID"] = os.getenv("CLIENT_ID") or "3381af92-2b9e-11e3-b191-71861300734c"
  wrk.headers["X-Project-ID"] = M.project
  -- A Keystone token (make bench-auth): validated once, then cached.
  local token = os.getenv("AUTH_TOKEN")
  if token and token ~= "" then wrk.headers["X-Auth-Token"] = token end
end

-- message returns one message object whose JSON encoding is about size bytes.
function M.message(size)
  local head = '{"ttl":3600,"body":{"event":"bench","pad":"'
  local tail = '"}}'
  local pad = size - #head - #tail
  if pad < 0 then pad = 0 end
  return head .. string.rep("x", pad) .. tail
end

function M.post_body(size, batch)
  local parts = {}
  for i = 1, batch do parts[i] = M.message(size) end
  return '{"messages":[' .. table.concat(parts, ",") .. ']}'
end

-- pace makes every connection wait DELAY_MS between requests (wrk's delay
-- hook), for a fixed offered rate instead of saturation (make
-- bench-profile); unset, requests go back to back.
function M.pace()
  local ms = tonumber(os.getenv("DELAY_MS") or "0")
  if ms > 0 then
    delay = function() return ms end
  end
end

local threads = {}

function M.setup(thread)
  table.insert(threads, thread)
end

-- report prints one line that bench_server.py parses; counters are globals
-- of each thread's Lua state, summed here.
function M.report(summary, latency, counters)
  local sums = {}
  for _, name in ipairs(counters) do
    sums[name] = 0
    for _, t in ipairs(threads) do sums[name] = sums[name] + (t:get(name) or 0) end
  end
  local e = summary.errors
  local extra = {}
  for _, name in ipairs(counters) do
    table.insert(extra, string.format('"%s":%d', name, sums[name]))
  end
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d%s%s}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean, latency.max,
    e.connect, e.read, e.write, e.status, e.timeout,
    #extra > 0 and "," or "", table.concat(extra, ",")))
end

return M
