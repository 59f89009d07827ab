-- internal/record's shared functions. Every record script starts with the
-- schema (fields, states, events and reply codes as F, S, E, R and TERMINAL():
-- rendered from Go when a script is
-- built), HEAD and TAIL, then these.

-- rec_seq(ev, seq): the event JSON ev (an object without "seq") with the
-- sequence number seq as its first member.
local function rec_seq(ev, seq)
  return '{"seq":' .. seq .. ',' .. string.sub(ev, 2)
end

-- hist_count(mk, raw) counts the event raw into the elision marker mk.
local function hist_count(mk, raw)
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= "table" then mk.count = mk.count + 1 return end
  mk.count = mk.count + (tonumber(v.count) or 1)
  local e = v.event
  if (tonumber(v.attempt) or 0) > 0 and (e == E.succeeded or e == E.retrying or e == E.restarting or e == E.dead_lettered) then
    mk.attempts = mk.attempts + 1
  end
end

-- hist_append(key, ev, merge) appends the event ev (JSON, with its seq) to
-- the history key and returns the history's length (1: this call created
-- it), or 0 when ev was merged, and the event as stored:
--   * merge "1" (a deferral): when the last event is a deferral too, it is
--     replaced by ev counted one more (count), keeping the first
--     deferral's time as since. An hours-long outage is one event.
--   * past HEAD + 1 + TAIL events, the events after the first HEAD are
--     folded into one history_elided event at index HEAD that counts them
--     (and the attempt outcomes among them) and keeps the seq of the first.
-- cjson encodes numbers with 14 significant digits: exact for every
-- integer an event holds.
local function hist_append(key, ev, merge)
  if merge == "1" then
    local last = redis.call("LINDEX", key, -1)
    if last then
      local ok, l = pcall(cjson.decode, last)
      if ok and type(l) == "table" and l.event == E.deferred then
        local e = cjson.decode(ev)
        e.count = (tonumber(l.count) or 1) + 1
        e.since = l.since or l.at
        local merged = cjson.encode(e)
        redis.call("LSET", key, -1, merged)
        return 0, merged
      end
    end
  end
  local len = redis.call("RPUSH", key, ev)
  if len <= HEAD + 1 + TAIL then return len, ev end
  while redis.call("LLEN", key) > HEAD + 1 + TAIL do
    local m = redis.call("LINDEX", key, HEAD)
    local ok, mk = pcall(cjson.decode, m)
    if ok and type(mk) == "table" and mk.event == E.history_elided then
      hist_count(mk, redis.call("LINDEX", key, HEAD + 1))
      redis.call("LSET", key, HEAD + 1, "\0agentq:elided")
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
      hist_count(mk, raw)
    end
    redis.call("LSET", key, HEAD, cjson.encode(mk))
  end
  return len, ev
end

-- rec_announce(rec, watched, ev): announces the stored event ev of the
-- record rec on the task's shard channel (rec .. ":events",
-- rkeys.TaskEvents; SPUBLISH: on a Cluster it stays on the task's shard)
-- when someone watches the task (watched: the record's watch field, which
-- Store.Watch sets), so that a task nobody waits for costs nothing more.
-- A server without sharded pub/sub (miniredis, Redis < 7) announces
-- nothing; waiters re-check on their own.
local function rec_announce(rec, watched, ev)
  if watched then redis.pcall("SPUBLISH", rec .. ":events", ev) end
end

-- rec_outbox(rec, stored, outbox, due): the webhook outbox of a record
-- that names webhooks (its notify field is set): pushes the stored event
-- onto the task's outbox (rkeys.TaskOutbox, in the task's slot; it lives
-- OUTBOX_LIFE seconds after its last push) and, when due is given (the
-- webhooks' due set, rkeys.WebhooksDue: not on a Redis Cluster, where the
-- caller adds the task in a second step), makes the task due now (LT 0:
-- also when it waited for a retry).
local function rec_outbox(rec, stored, outbox, due)
  redis.call("RPUSH", outbox, stored)
  redis.call("EXPIRE", outbox, OUTBOX_LIFE)
  if due then redis.call("ZADD", due, "LT", 0, string.sub(rec, TASK_ID_AT, -2)) end
end

-- rec_event(rec, hist, ev, seq, merge, watched, notify, outbox, due): every
-- history event a script records goes through here. It appends the event
-- ev (JSON without seq) with the sequence number seq to the history hist
-- of the record rec (hist_append), announces it as stored (rec_announce)
-- and, when the record names webhooks (notify: its notify field; outbox
-- and due: rec_outbox's keys), puts it in the webhook outbox. A task that
-- names no webhook costs nothing more. Returns hist_append's length and 1
-- when the event went in the outbox (else 0).
local function rec_event(rec, hist, ev, seq, merge, watched, notify, outbox, due)
  local len, stored = hist_append(hist, rec_seq(ev, seq), merge)
  rec_announce(rec, watched, stored)
  if notify and notify ~= "" and outbox then
    rec_outbox(rec, stored, outbox, due)
    return len, 1
  end
  return len, 0
end

-- rec_expire(rec, hist, life, keep, created): gives both keys the lifetime
-- life (seconds) unless the record's remaining lifetime is at least keep
-- (a write moments after the last one spares Redis the EXPIREs); a history
-- this write created (created) gets it in any case. Every script that sets
-- the record's lifetime sets the history's to at least as much.
local function rec_expire(rec, hist, life, keep, created)
  local fresh = redis.call("TTL", rec) >= keep
  if not fresh then redis.call("EXPIRE", rec, life) end
  if not fresh or created then redis.call("EXPIRE", hist, life) end
end

-- rec_apply(rec, hist, o, outbox, due) is the checked write (Store.Apply)
-- on the record rec and history hist (outbox, due: rec_outbox's keys),
-- with its ARGV from ARGV[o+1] on:
--   o+1 the delivery's run, o+2 the write ID, o+3 the attempt number
--   within the run (0: the write starts no attempt), o+4 the delivery's
--   restarts, o+5 the run the write moves the record to (-1: none; a
--   restart), o+6 lifetime (s), o+7 the remaining lifetime that needs no
--   refresh (s), o+8 event JSON ("" for none), o+9 "1" to merge a deferral,
--   o+10 "1" to clear the error fields (when set), o+11 the number n of
--   seed pairs, then the n pairs (record fields seeded when the record was
--   not written by Create), then the field/value pairs to set.
-- Returns {R.applied, attempts, seq, outboxed} (outboxed: 1 when the
-- event went in the webhook outbox) or {R.again, attempts} (this write ID
-- was applied already), or, writing nothing, {R.canceled}, {R.stale} (a
-- newer run), {R.ended} (the run has ended), {R.seed} (no seed pairs
-- but the record needs them) or {R.outbox} (the record names webhooks and
-- outbox is nil: send the write again with rec_outbox's keys).
local function rec_apply(rec, hist, o, outbox, due)
  local cur = redis.call("HMGET", rec, F.run, F.state, F.attempts, F.attempts_base, F.seq, F.write_id,
    F.error_class, F.error, F.watch, F.notify)
  if cur[6] == ARGV[o + 2] then return {R.again, tonumber(cur[3]) or 0} end
  if cur[2] == S.canceled then return {R.canceled} end
  local run = tonumber(cur[1] or "-1")
  local d = tonumber(ARGV[o + 1])
  if run > d then return {R.stale} end
  if run == d and TERMINAL(cur[2]) then return {R.ended} end
  if cur[10] and cur[10] ~= "" and not outbox then return {R.outbox} end
  local last = o + 11 + 2 * tonumber(ARGV[o + 11])
  if not cur[1] then
    if last == o + 11 then return {R.seed} end
    for i = o + 12, last, 2 do redis.call("HSETNX", rec, ARGV[i], ARGV[i + 1]) end
    cur[10] = redis.call("HGET", rec, F.notify)
  end
  local attempts = tonumber(cur[3]) or 0
  local base = tonumber(cur[4]) or 0
  -- The rare changes (a new run, a restart, an error to clear) go in a
  -- second HSET; the common write is one HSET of the arguments.
  local rare = nil
  if run < d then
    base = attempts
    rare = {F.run, d, F.restarts, ARGV[o + 4], F.attempts_base, base}
  end
  local n = tonumber(ARGV[o + 3])
  if n > 0 and base + n > attempts then attempts = base + n end
  local nextrun = tonumber(ARGV[o + 5])
  if nextrun >= 0 then
    rare = rare or {}
    rare[#rare + 1] = F.run; rare[#rare + 1] = nextrun
    rare[#rare + 1] = F.attempts_base; rare[#rare + 1] = attempts
  end
  if ARGV[o + 10] == "1" and ((cur[7] or "") ~= "" or (cur[8] or "") ~= "") then
    rare = rare or {}
    rare[#rare + 1] = F.error_class; rare[#rare + 1] = ""
    rare[#rare + 1] = F.error; rare[#rare + 1] = ""
  end
  if rare then redis.call("HSET", rec, unpack(rare)) end
  local seq = tonumber(cur[5]) or 0
  local ev = ARGV[o + 8]
  if ev ~= "" then seq = seq + 1 end
  redis.call("HSET", rec, F.write_id, ARGV[o + 2], F.attempts, attempts, F.seq, seq, unpack(ARGV, last + 1))
  local len, outboxed = 0, 0
  if ev ~= "" then len, outboxed = rec_event(rec, hist, ev, seq, ARGV[o + 9], cur[9], cur[10], outbox, due) end
  rec_expire(rec, hist, ARGV[o + 6], tonumber(ARGV[o + 7]), len == 1)
  return {R.applied, attempts, seq, outboxed}
end
