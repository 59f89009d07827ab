-- succeed_acked.lua: the common success written lean, with asynq's
-- acknowledgement of the delivery (and, asked for, the queue's next run)
-- in one script: Store.ApplyAcked's first try for a plain success
-- (Succeeded of a task whose seed names no webhook). It writes exactly what
-- apply_acked.lua (rec_apply) writes for the same success, and reads and is
-- sent less: a quick task's success is the hottest write there is.
-- When the record is not in the common state it writes nothing, runs
-- nothing of asynq's and answers {R.full}: the caller sends the write as
-- apply_acked (which decides the rare cases).
-- KEYS[1..5] asynq's done keys, KEYS[6] task record, KEYS[7] history,
-- KEYS[8..11] the fair dispatch's release keys (as apply_acked.lua's, with
-- no webhook keys); with the next run asked for, KEYS[12..15] the four of
-- dequeue.lua's keys the script has not already (acked.lua: its pending
-- list, paused set, tenants' settings and default tenant's pass).
-- ARGV[1..3] asynq's done arguments; with the next run asked for,
-- ARGV[4..9] dequeue.lua's six arguments; then, from o+1 (o: 3, or 9
-- with the next run): o+1 the delivery's run, o+2 the write ID, o+3 the
-- attempt number within the run (>= 1), o+4 lifetime (s), o+5 the
-- remaining lifetime that needs no refresh (s), o+6 the succeeded event's
-- JSON without its opening "{" and without seq, o+7 the write's time
-- (F.updated_at), o+8 the delivery's worker ("" for none), then the field
-- pairs to set beyond state and updated_at: F.usage first when the
-- success adds usage (its F.usage value: FormatUsageSum), then F.result
-- when there is a result.
-- Returns R.applied, or the next run's message when the next run was
-- asked for and handed out (acked.lua); asynq's done's
-- error (NOT FOUND) after the record write; or {R.full}, nothing written
-- and asynq's done not run, when the record is not at the delivery's run,
-- this write ID was applied already, its state is not pending, scheduled,
-- active, retrying or restarting (a waiting or deferred record may resume:
-- rec_apply decides the wait), it names webhooks, the success adds usage
-- to a sum the record has, or the run's attempt is active on another
-- delivery (a lost attempt). The record's steps, resumes and signals
-- (which only the refresh of the lifetimes needs here) are read only when
-- the lifetimes are refreshed.
local n, o = #KEYS, 3
local fetch = n > 11
if fetch then n, o = n - 4, 9 end
local rec, hist, wid, worker = KEYS[6], KEYS[7], ARGV[o + 2], ARGV[o + 8]
local use = ARGV[o + 9] == F.usage
local cur
if use then
  cur = redis.call("HMGET", rec, F.run, F.state, F.attempts, F.attempts_base, F.seq, F.write_id, F.error_class, F.watch,
    F.notify, F.worker, F.usage)
else
  cur = redis.call("HMGET", rec, F.run, F.state, F.attempts, F.attempts_base, F.seq, F.write_id, F.error_class, F.watch,
    F.notify, F.worker)
end
local state = cur[2]
if cur[1] ~= ARGV[o + 1] or cur[6] == wid or (cur[9] or "") ~= "" or cur[11] or not (state == S.pending or
  state == S.active or state == S.retrying or state == S.scheduled or state == S.restarting) then
  return {R.full}
end
-- a: the attempts written (the stored string when unchanged), as
-- rec_apply makes it.
local a = ARGV[o + 3]
if cur[3] or cur[4] then
  local attempts, base, k = tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, tonumber(a)
  local ran = attempts - base
  if worker ~= "" and state == S.active and ran > 0 and (ran ~= k or (cur[10] or worker) ~= worker) then
    return {R.full}
  end
  if base + k <= attempts then
    a = cur[3]
  elseif base ~= 0 then
    a = base + k
  end
end
if (cur[7] or "") ~= "" then
  redis.call("HSET", rec, F.error_class, "", F.classified_by, "", F.error, "")
end
local seq = tostring((tonumber(cur[5]) or 0) + 1)
local wk, wv = F.write_id, wid
if worker ~= "" and cur[10] ~= worker then wk, wv = F.worker, worker end
redis.call("HSET", rec, F.write_id, wid, wk, wv, F.attempts, a, F.seq, seq, F.state, S.succeeded, F.updated_at, ARGV[o + 7],
  unpack(ARGV, o + 9))
local ev = '{"seq":' .. seq .. ',' .. ARGV[o + 6]
local len = redis.call("RPUSH", hist, ev)
if len > HEAD + TAIL then hist_trim(hist) end
if cur[8] then redis.pcall("SPUBLISH", rec .. ":events", ev) end
if redis.call("TTL", rec) < tonumber(ARGV[o + 5]) then
  local life = ARGV[o + 4]
  local x = redis.call("HMGET", rec, F.steps, F.resumes, F.signals)
  redis.call("EXPIRE", rec, life)
  redis.call("EXPIRE", hist, life)
  if x[1] then redis.call("EXPIRE", rec .. STEPS_SUFFIX, life) end
  if x[3] then redis.call("EXPIRE", rec .. SIGNALS_SUFFIX, life) end
  if x[2] then
    for _, sfx in ipairs(CHILDREN_SUFFIXES) do redis.call("EXPIRE", rec .. sfx, life) end
  end
elseif len == 1 then
  redis.call("EXPIRE", hist, ARGV[o + 4])
end
local r = R.applied
