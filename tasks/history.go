package tasks

import "fmt"

// historyLua defines hist_append(key, ev, merge), which every script that
// adds to a task's history calls instead of RPUSH, so that a history stays
// bounded however long its task lives. It returns the history's length
// after the RPUSH (1: this call created it), or 0 when ev was merged:
//
//   - merge "1" (a deferral): when the last event is a deferral too, it is
//     replaced by ev counted one more (Event.Count), keeping the first
//     deferral's time as Since. An hours-long outage is one event.
//   - then, past HistoryHead + 1 + HistoryTail events, the events after the
//     first HistoryHead are folded into one EventElided event at index
//     HistoryHead that counts them (and the attempt outcomes among them).
//
// Redis' cjson encodes numbers with 14 significant digits: exact for every
// integer an event holds.
var historyLua = fmt.Sprintf(`
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
  local head, tail = %d, %d
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
`, HistoryHead, HistoryTail)
