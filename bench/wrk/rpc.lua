-- A2A JSON-RPC load for wrk: one script, every scenario that is a request and its response.
--
--   wrk -t1 -c32 -d10s -s bench/wrk/rpc.lua http://127.0.0.1:PORT/v1/a2a -- \
--       <method> <bearer-key|-> <nonce> <expect> [ids-file|-] [answers]
--
-- method  send : message/send, blocking, a fresh messageId on every request
--                ("<nonce>-<thread>-<counter>", so no two requests in one run, or in two
--                runs against the same store, ever repeat one)
--         get  : tasks/get, cycling through the task ids in ids-file (one per line)
--         send10, get10 : the same in A2A 1.0 (SendMessage, GetTask in ProtoJSON, with the
--                header A2A-Version: 1.0)
--         v1-get, v2-get : OpenWOP REST, GET one run, cycling through the run ids in ids-file:
--                GET /v1/runs/<id>, or at major 2 GET /runs/default~2F<id> (the same run, bound)
--         v1-create, v2-create : OpenWOP REST, POST /v1/runs or POST /runs, an echo run each
--                (the URL's path is replaced by these; a good answer is 200 for a get, 201 for a create)
-- key     the Authorization bearer token, or "-" for none
-- expect  substrings every good response body holds, separated by tabs (e.g. "completed");
--         any other answer (HTTP error, JSON-RPC error, wrong state) counts as a failure
-- answers a thread stops once it has had this many answers (the quick profile's smoke: the
--         run still lasts -d, as wrk's main thread sleeps it out, but the load and its CPU end there);
--         absent or 0, it loads the server for the whole -d
--
-- done() prints one line "WRK_JSON {...}": requests, failures, duration and the latency
-- percentiles in microseconds, which bench/loadgen.py reads.

local threads = {}
local thread_count = 0

function setup(thread)
  thread:set("tid", thread_count)
  thread_count = thread_count + 1
  table.insert(threads, thread)
end

local method, key, nonce
local expect = {}
local ids = {}
local counter = 0
failures = 0
first_failure = ""
good_status = 200
local answers, max_answers = 0, 0

function init(args)
  method = args[1] or "send"
  key = args[2] or "-"
  nonce = args[3] or tostring(os.time())
  for part in string.gmatch(args[4] or '"result"', "[^\t]+") do table.insert(expect, part) end
  if method == "get" or method == "get10" or method == "v1-get" or method == "v2-get" then
    assert(args[5] and args[5] ~= "-", "ids file")
    local f = assert(io.open(args[5], "r"), "ids file")
    for line in f:lines() do
      if #line > 0 then table.insert(ids, line) end
    end
    f:close()
    assert(#ids > 0, "no task ids")
    counter = tid * 7919
  end
  headers = { ["Content-Type"] = "application/json" }
  if key ~= "-" then headers["Authorization"] = "Bearer " .. key end
  if method == "send10" or method == "get10" then headers["A2A-Version"] = "1.0" end
  if method == "v2-get" or method == "v2-create" then headers["OpenWOP-Version"] = "2.0" end
  good_status = (method == "v1-create" or method == "v2-create") and 201 or 200
  max_answers = tonumber(args[6] or "0") or 0
end

local create_body = '{"workflowId":"echo","inputs":{"prompt":"hello bench"}}'

local function openwop()
  if method == "v1-create" then return wrk.format("POST", "/v1/runs", headers, create_body) end
  if method == "v2-create" then return wrk.format("POST", "/runs", headers, create_body) end
  local id = ids[(counter % #ids) + 1]
  if method == "v1-get" then return wrk.format("GET", "/v1/runs/" .. id, headers) end
  return wrk.format("GET", "/runs/default~2F" .. id, headers)
end

function request()
  counter = counter + 1
  if string.sub(method, 1, 1) == "v" then return openwop() end
  local body
  if method == "send" then
    body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"message/send","params":{"message":'
      .. '{"kind":"message","role":"user","messageId":"' .. nonce .. '-' .. tid .. '-' .. counter .. '",'
      .. '"parts":[{"kind":"text","text":"hello bench"}]},"configuration":{"blocking":true}}}'
  elseif method == "send10" then
    body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"SendMessage","params":{"message":'
      .. '{"role":"ROLE_USER","messageId":"' .. nonce .. '-' .. tid .. '-' .. counter .. '",'
      .. '"parts":[{"text":"hello bench"}]},"configuration":{"returnImmediately":false}}}'
  elseif method == "get10" then
    local id = ids[(counter % #ids) + 1]
    body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"GetTask","params":{"id":"' .. id .. '"}}'
  else
    local id = ids[(counter % #ids) + 1]
    body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tasks/get","params":{"id":"' .. id .. '"}}'
  end
  return wrk.format("POST", nil, headers, body)
end

local function expected(body)
  for _, part in ipairs(expect) do
    if not string.find(body, part, 1, true) then return false end
  end
  return true
end

function response(status, hdrs, body)
  if status ~= good_status or not expected(body) or string.find(body, '"error":', 1, true) then
    failures = failures + 1
    if first_failure == "" then first_failure = status .. " " .. string.sub(body, 1, 300) end
  end
  answers = answers + 1
  if max_answers > 0 and answers >= max_answers then wrk.thread:stop() end
end

local function q(s)
  return '"' .. string.gsub(string.gsub(s, '\\', '\\\\'), '"', '\\"'):gsub("[%c]", " ") .. '"'
end

function done(summary, latency, requests)
  local failed = 0
  local sample = ""
  for _, t in ipairs(threads) do
    failed = failed + t:get("failures")
    local f = t:get("first_failure")
    if sample == "" and f ~= nil then sample = f end
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"failures":%d,'
      .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
      .. '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"first_failure":%s}\n',
    summary.requests, summary.duration, summary.bytes, failed,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    q(sample)))
end
