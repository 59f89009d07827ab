-- internal/record's shared functions for the scripts other than the checked
-- write (which has its own, lua/rec_apply.lua): they follow the schema and
-- lua/history.lua. No KEYS or ARGV of their own; each function's comment
-- names its arguments and what it returns.

-- rec_seq(ev, seq): the event JSON ev (an object without "seq") with the
-- sequence number seq as its first member.
local function rec_seq(ev, seq)
  return '{"seq":' .. seq .. ',' .. string.sub(ev, 2)
end

-- hist_append(key, ev, merge) appends the event ev (JSON, with its seq) to
-- the history key and returns the history's length (1: this call created
-- it), or 0 when ev was merged (merge "1", a deferral: hist_merge), and
-- the event as stored; a history grown past HEAD + 1 + TAIL events is
-- trimmed (hist_trim).
local function hist_append(key, ev, merge)
  if merge == "1" then
    local merged = hist_merge(key, ev)
    if merged then return 0, merged end
  end
  local len = redis.call("RPUSH", key, ev)
  if len > HEAD + TAIL then hist_trim(key) end
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
-- the record's lifetime sets the history's to at least as much. Returns
-- whether the record was fresh (its lifetime left as it was) and its
-- remaining lifetime now (s).
local function rec_expire(rec, hist, life, keep, created)
  local ttl = redis.call("TTL", rec)
  local fresh = ttl >= keep
  if not fresh then redis.call("EXPIRE", rec, life); ttl = tonumber(life) end
  if not fresh or created then redis.call("EXPIRE", hist, life) end
  return fresh, ttl
end

