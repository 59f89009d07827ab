-- internal/record's history functions, which every record script that
-- writes a history has (after the schema: F, S, E, R, TERMINAL(), HEAD and
-- TAIL, rendered from Go when a script is built). Only the rare paths are
-- functions: a script's common path (an RPUSH) is its own, and each
-- function defined costs every call of the script a closure.
-- cjson encodes numbers with 14 significant digits: exact for every
-- integer an event holds.

-- hist_merge(key, ev): when the last event of the history key is a
-- deferral, replaces it by the deferral ev (JSON, with its seq) counted
-- one more (count), keeping the first deferral's time as since, and
-- returns the event as stored; otherwise returns nil, writing nothing.
-- An hours-long outage is one event.
local function hist_merge(key, ev)
  local last = redis.call("LINDEX", key, -1)
  if not last then return nil end
  local ok, l = pcall(cjson.decode, last)
  if not ok or type(l) ~= "table" or l.event ~= E.deferred then return nil end
  local e = cjson.decode(ev)
  e.count = (tonumber(l.count) or 1) + 1
  e.since = l.since or l.at
  local merged = cjson.encode(e)
  redis.call("LSET", key, -1, merged)
  return merged
end

-- hist_trim(key): past HEAD + 1 + TAIL events, folds the events of the
-- history key after the first HEAD into one history_elided event at index
-- HEAD that counts them (and the attempt outcomes among them) and keeps the
-- seq of the first. A record holding its first event (F.first: the list
-- starts at the second) counts it: the bounds and the index are one less
-- in the list. Its callers call it once the list holds more than HEAD +
-- TAIL events.
local function hist_trim(key)
  local off = redis.call("HEXISTS", string.sub(key, 1, -#HIST_SUFFIX - 1), F.first)
  local head = HEAD - off
  -- count(mk, raw) counts the event raw into the elision marker mk.
  local function count(mk, raw)
    local ok, v = pcall(cjson.decode, raw)
    if not ok or type(v) ~= "table" then mk.count = mk.count + 1 return end
    mk.count = mk.count + (tonumber(v.count) or 1)
    local e = v.event
    if (tonumber(v.attempt) or 0) > 0 and (e == E.succeeded or e == E.retrying or e == E.restarting or e == E.dead_lettered) then
      mk.attempts = mk.attempts + 1
    end
  end
  while redis.call("LLEN", key) > head + 1 + TAIL do
    local m = redis.call("LINDEX", key, head)
    local ok, mk = pcall(cjson.decode, m)
    if ok and type(mk) == "table" and mk.event == E.history_elided then
      count(mk, redis.call("LINDEX", key, head + 1))
      redis.call("LSET", key, head + 1, "\0agentq:elided")
      redis.call("LREM", key, 1, "\0agentq:elided")
    else
      local at, seq = nil, nil
      if ok and type(mk) == "table" then
        if type(mk.at) == "string" then at = mk.at end
        seq = tonumber(mk.seq)
      end
      local raw = m
      mk = {seq = seq, event = E.history_elided, at = at, count = 0, attempts = 0, attempt = 0, restart = 0,
            error_class = "", error = "", delay_ms = 0}
      count(mk, raw)
    end
    redis.call("LSET", key, head, cjson.encode(mk))
  end
end

-- rec_outbox(rec, stored, outbox, due): the webhook outbox of a record
-- that names webhooks (its notify field is set): pushes the stored event
-- onto the task's outbox (rkeys.TaskOutbox, in the task's slot; it lives
-- OUTBOX_LIFE seconds after its last push) and, when due is given (the
-- webhooks' due set, rkeys.WebhooksDue: not on a Redis Cluster, where the
-- caller adds the task in a second step), makes the task due now: scored
-- by the server's TIME in ms (SERVER_NOW_MS), so that due tasks are served in the order of
-- their events (LT: also when it waited for a retry; an earlier score
-- stays).
local function rec_outbox(rec, stored, outbox, due)
  redis.call("RPUSH", outbox, stored)
  redis.call("EXPIRE", outbox, OUTBOX_LIFE)
  if due then
    redis.call("ZADD", due, "LT", SERVER_NOW_MS, string.sub(rec, TASK_ID_AT, -2))
  end
end
