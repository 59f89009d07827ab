
local function hist_count(mk, raw)
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= "table" then mk.count = mk.count + 1 return end
  mk.count = mk.count + (tonumber(v.count) or 1)
  local e = v.event
  if (tonumber(v.attempt) or 0) > 0 and (e == "succeeded" or e == "retrying" or e == "restarting" or e == "dead_lettered") then
    mk.attempts = mk.attempts + 1
  end
end
local function hist_append(key, ev, merge)
  if merge == "1" then
    local last = redis.call("LINDEX", key, -1)
    if last then
      local ok, l = pcall(cjson.decode, last)
      if ok and type(l) == "table" and l.event == "deferred" then
        local e = cjson.decode(ev)
        e.count = (tonumber(l.count) or 1) + 1
        e.since = l.since or l.at
        redis.call("LSET", key, -1, cjson.encode(e))
        return 0
      end
    end
  end
  local len = redis.call("RPUSH", key, ev)
  local head, tail = 20, 80
  if len <= head + 1 + tail then return len end
  while redis.call("LLEN", key) > head + 1 + tail do
    local m = redis.call("LINDEX", key, head)
    local ok, mk = pcall(cjson.decode, m)
    if ok and type(mk) == "table" and mk.event == "history_elided" then
      hist_count(mk, redis.call("LINDEX", key, head + 1))
      redis.call("LSET", key, head + 1, "\0agentq:elided")
      redis.call("LREM", key, 1, "\0agentq:elided")
    else
      local at = nil
      if ok and type(mk) == "table" and type(mk.at) == "string" then at = mk.at end
      local raw = m
      mk = {event = "history_elided", at = at, count = 0, attempts = 0, attempt = 0, restart = 0,
            error_class = "", error = "", delay_ms = 0}
      hist_count(mk, raw)
    end
    redis.call("LSET", key, head, cjson.encode(mk))
  end
  return len
end

local function agentq_begin(rec, hist, o)
  local cur = redis.call("HMGET", rec, "run", "state", "attempts", "error_class", "error")
  if cur[2] == "canceled" then return -4 end
  local run = tonumber(cur[1] or "-1")
  local d = tonumber(ARGV[o + 1])
  if run > d then return -1 end
  if run == d and (cur[2] == "succeeded" or cur[2] == "dead_lettered") then return -2 end
  local last = o + 7 + 2 * tonumber(ARGV[o + 7])
  if not cur[1] then
    if last == o + 7 then return -3 end
    for i = o + 8, last, 2 do redis.call("HSETNX", rec, ARGV[i], ARGV[i+1]) end
  end
  local n = (tonumber(cur[3]) or 0) + 1
  if run == d then
    redis.call("HSET", rec, "attempts", n, unpack(ARGV, last + 1))
  else
    redis.call("HSET", rec, "run", ARGV[o + 1], "restarts", ARGV[o + 3], "attempts", n, unpack(ARGV, last + 1))
  end
  if ARGV[o + 6] == "1" and ((cur[4] or "") ~= "" or (cur[5] or "") ~= "") then
    redis.call("HSET", rec, "error_class", "", "error", "")
  end
  local fresh = redis.call("TTL", rec) >= tonumber(ARGV[o + 5])
  if not fresh then redis.call("EXPIRE", rec, ARGV[o + 2]) end
  local len = 0
  if ARGV[o + 4] ~= "" then len = hist_append(hist, ARGV[o + 4], "0") end
  if not fresh or len == 1 then redis.call("EXPIRE", hist, ARGV[o + 2]) end
  return n
end

return agentq_begin(KEYS[1], KEYS[2], 0)
