-- wrk script of `npm run bench` (bench/wrk.ts): after wrk's own text report, prints its results as
-- one JSON line starting with "wrk-report " so that the bench parses numbers, not prose.
-- Latencies are in microseconds, as wrk keeps them.

-- Request headers come from WRK_HEADERS ("name: value" lines), not from -H, so that the API key
-- does not show in the process list.
for name, value in string.gmatch(os.getenv("WRK_HEADERS") or "", "([^:\n]+): ([^\n]*)") do
  wrk.headers[name] = value
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

-- Counting statuses needs response(), and defining it makes wrk parse every response's headers and
-- body in Lua, which costs wrk CPU: only the runs that need a per-status count (the 304s) ask.
if os.getenv("WRK_COUNT_STATUSES") == "1" then
  statuses = {}
  function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local totals = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses") or {}) do
      totals[status] = (totals[status] or 0) + n
    end
  end
  local counted = {}
  for status, n in pairs(totals) do
    counted[#counted + 1] = string.format('"%d":%d', status, n)
  end
  local e = summary.errors
  io.write(string.format(
    'wrk-report {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"latency_us":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d},' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"non_2xx_3xx":%d,"statuses":{%s}}\n',
    summary.requests, summary.duration, summary.bytes,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.timeout, e.status, table.concat(counted, ",")))
end
