-- rec_apply(rec, hist, o, outbox, due) is the checked write (Store.Apply)
-- on the record rec and history hist (outbox, due: rec_outbox's keys, nil
-- when the write came without them), with its ARGV from ARGV[o+1] on:
--   o+1 the delivery's run, o+2 the write ID, o+3 the attempt number
--   within the run (0: the write starts no attempt), o+4 the delivery's
--   restarts, o+5 the run the write moves the record to (-1: none; a
--   restart), o+6 lifetime (s), o+7 the remaining lifetime that needs no
--   refresh (s), o+8 the event's JSON without its opening "{" and without
--   seq ("" for none), o+9 "1" to merge a deferral, o+10 "1" to clear the
--   error fields (error_class, classified_by, error; when set), o+11 the
--   number n of seed pairs, o+12 the usage to add to the task's sum
--   (F.usage: comma-separated integers, see FormatUsageSum; "" for none),
--   o+13 the delivery's worker ("" for none; only a write that starts an
--   attempt names one), then the n seed pairs (record fields seeded when the record was not
--   written by Create), then the field/value pairs to set.
-- Returns R.applied, a bare code (the common answer: a table reply costs
-- Redis 7.0 about a microsecond more, as much as a 5-field HMGET), or
-- {R.again, attempts} (this write ID was applied already), or, writing
-- nothing, {R.canceled}, {R.stale} (a newer run), {R.ended} (the run has
-- ended), {R.seed} (no seed pairs but the record needs them) or
-- {R.outbox} (the record names webhooks and outbox is nil: send the write
-- again with rec_outbox's keys). A write whose event went in the webhook
-- outbox answers {R.applied, attempts, seq, 1} instead of the bare code.
-- The event gets the record's next seq, is appended to the history
-- (hist_merge, hist_trim on their rare paths) and announced on the task's
-- shard channel (rec .. ":events", rkeys.TaskEvents; SPUBLISH: on a
-- Cluster it stays on the task's shard) when someone watches the task (the
-- record's watch field, which Store.Watch sets; a server without sharded
-- pub/sub, miniredis or Redis < 7, announces nothing and waiters re-check
-- on their own). Both keys get the lifetime unless the record's remaining
-- lifetime is at least o+7 (a write moments after the last one spares
-- Redis the EXPIREs); a history this write created gets it in any case.
-- Every script that sets the record's lifetime sets the history's to at
-- least as much, and the steps hash's (rec .. STEPS_SUFFIX, rkeys.TaskSteps:
-- derived from the record's key, in its slot; only when the record counts
-- steps, F.steps). A write that starts an attempt (o+3 > 0) of a task with
-- steps answers {R.applied, attempts, seq, outboxed, steps} (steps: the
-- record's count), so that the delivery reads the steps only then.
-- Suspends and signals (the rare path: only a record that counts resumes,
-- F.resumes, or signals, F.signals, pays for it): a write that starts an
-- attempt of such a task answers {R.applied, attempts, seq, outboxed,
-- steps, signals, wait, outcome, ready, resumed} (signals: the record's count;
-- wait: F.wait, "" for none; outcome: F.wait_outcome; ready: 1 when the
-- write itself suspends the run, state waiting, and the signal it waits
-- for, F.wait_signal in its pairs, is in the signals hash already;
-- resumed: 1 when this write decided the wait's outcome, below). The
-- first start of a run after a suspend (state waiting, or deferred by
-- the resumed run's admission; a wait kept, its outcome ""; the write
-- moving to no other run: not a requeue of a task that died waiting)
-- decides what ended the wait, atomically
-- with the start: "signal" when the signal waited for is in the signals
-- hash (rec .. SIGNALS_SUFFIX, rkeys.TaskSignals), else "timeout"; a wait
-- for no signal, "timer"; a children wait (its F.wait's kind, CHILDREN_KIND)
-- "children" when the children's end resumed it (child_end.lua set
-- F.children_resumed to this run: every child ended, or, mode any, one
-- succeeded), else "timeout". It sets F.wait_outcome and appends the event
-- resumed before the write's own. The field pairs start with state and
-- updated_at (Change.fields): the resumed event's time is updated_at's.
-- A lost attempt: a write that starts an attempt (o+3 > 0) for a worker
-- (o+13) and finds the record at its run, active, with the run's attempt
-- (F.attempts - F.attempts_base) another number or started by another
-- worker (F.worker) — a delivery that never reported: its worker was
-- killed, froze or lost its lease, and asynq redelivered the run —
-- appends first the event interrupted with lost true, reason WORKER_LOST,
-- the lost attempt and its worker, atomically with the start. The write
-- records its worker (F.worker) when it is another.
-- The signals hash gets the record's lifetime with it (when it counts
-- signals), as the steps hash does; and, when the record counts resumes,
-- the children wait's keys (CHILDREN_SUFFIXES: rkeys.TaskChildren,
-- TaskChildSpecs, TaskChildEnds; derived from the record's key, in its
-- slot, as the steps hash; EXPIRE of a key that does not exist is a no-op).
-- This is the hottest script (every attempt's outcome): its common path is
-- written out rather than calling helpers, numbers it writes are formatted
-- once, as strings, and it reads only the error_class of the error fields
-- (error is set without error_class only on a canceled record, which it
-- refuses first).
local function rec_apply(rec, hist, o, outbox, due)
  local cur = redis.call("HMGET", rec, F.run, F.state, F.attempts, F.attempts_base, F.seq, F.write_id,
    F.error_class, F.watch, F.notify, F.usage, F.steps, F.resumes, F.signals, F.worker)
  if cur[6] == ARGV[o + 2] then return {R.again, tonumber(cur[3]) or 0} end
  local state = cur[2]
  if state == S.canceled then return {R.canceled} end
  local run = tonumber(cur[1] or "-1")
  local d = tonumber(ARGV[o + 1])
  if run > d then return {R.stale} end
  if run == d and TERMINAL(state) then return {R.ended} end
  local notify = cur[9]
  if notify and notify ~= "" and not outbox then return {R.outbox} end
  local last = o + 13 + 2 * tonumber(ARGV[o + 11])
  if not cur[1] then
    if last == o + 13 then return {R.seed} end
    for i = o + 14, last, 2 do redis.call("HSETNX", rec, ARGV[i], ARGV[i + 1]) end
    notify = redis.call("HGET", rec, F.notify)
  end
  -- attempts, and a (what is written: the stored string when unchanged).
  local a = cur[3] or "0"
  local attempts = tonumber(a) or 0
  local base = tonumber(cur[4]) or 0
  -- The rare changes (a new run, a restart, an error to clear) go in a
  -- second HSET; the common write is one HSET of the arguments.
  local rare = nil
  if run < d then
    base = attempts
    rare = {F.run, d, F.restarts, ARGV[o + 4], F.attempts_base, base}
  end
  local n = tonumber(ARGV[o + 3])
  -- pre: an event appended before the write's own (a lost attempt's, or
  -- a resume's, below: a lost attempt was active, a resume waits).
  local worker, pre = ARGV[o + 13], nil
  if n > 0 and worker ~= "" then
    local ran = attempts - base
    if run == d and state == S.active and ran > 0 and (ran ~= n or (cur[14] or worker) ~= worker) then
      local by = ""
      if cur[14] then by = ',"worker":' .. cjson.encode(cur[14]) end
      pre = '"at":"' .. ARGV[last + 4] .. '","event":"' .. E.interrupted .. '","attempt":' .. ran .. ',"restart":' ..
        ARGV[o + 4] .. ',"error_class":"","error":"","delay_ms":0' .. by .. ',"reason":"' .. WORKER_LOST .. '","lost":true}'
    end
  end
  if n > 0 and base + n > attempts then
    attempts = base + n
    if base == 0 then a = ARGV[o + 3] else a = attempts end
  end
  local nextrun = tonumber(ARGV[o + 5])
  if nextrun >= 0 then
    rare = rare or {}
    rare[#rare + 1] = F.run; rare[#rare + 1] = nextrun
    rare[#rare + 1] = F.attempts_base; rare[#rare + 1] = attempts
  end
  -- A task that suspended or got signals: its wait, and the resume.
  local info, resumed, ready = nil, nil, 0
  if n > 0 and (cur[12] or cur[13]) then
    info = redis.call("HMGET", rec, F.wait, F.wait_signal, F.wait_outcome, F.children_resumed)
    if cur[12] and nextrun < 0 and (state == S.waiting or state == S.deferred) and (info[3] or "") == "" and
      (info[1] or "") ~= "" then
      local by = "timer"
      if (info[2] or "") ~= "" then
        by = "timeout"
        if cur[13] and redis.call("HEXISTS", rec .. SIGNALS_SUFFIX, info[2]) == 1 then by = "signal" end
      elseif string.find(info[1], CHILDREN_KIND, 1, true) then
        by = "timeout"
        if info[4] == ARGV[o + 1] then by = "children" end
      end
      info[3] = by
      rare = rare or {}
      rare[#rare + 1] = F.wait_outcome; rare[#rare + 1] = by
      resumed = true
      pre = '"at":"' .. ARGV[last + 4] .. '","event":"resumed","attempt":' .. ARGV[o + 3] .. ',"restart":' ..
        ARGV[o + 4] .. ',"error_class":"","error":"","delay_ms":0,"resume":' .. cur[12] .. ',"by":"' .. by .. '"}'
    end
    if cur[13] and ARGV[last + 2] == S.waiting then
      for i = last + 5, #ARGV - 1, 2 do
        if ARGV[i] == F.wait_signal and ARGV[i + 1] ~= "" then
          ready = redis.call("HEXISTS", rec .. SIGNALS_SUFFIX, ARGV[i + 1])
        end
      end
    end
  end
  if ARGV[o + 10] == "1" and (cur[7] or "") ~= "" then
    rare = rare or {}
    rare[#rare + 1] = F.error_class; rare[#rare + 1] = ""
    rare[#rare + 1] = F.classified_by; rare[#rare + 1] = ""
    rare[#rare + 1] = F.error; rare[#rare + 1] = ""
  end
  if rare then redis.call("HSET", rec, unpack(rare)) end
  -- The task's usage sum is set with the common HSET: a task's first usage
  -- as it came; a later one added to it here, number by number (the
  -- fifth, the cost, only in one of them when the other was not priced),
  -- each saturating at MAX_SUM (usage.MaxSum, 2^53: exact in a Lua
  -- number; the Go side writes every number within it).
  local use = ARGV[o + 12]
  if use ~= "" and cur[10] then
    local sum, i = {}, 0
    for v in string.gmatch(cur[10], "%d+") do i = i + 1; sum[i] = tonumber(v) end
    i = 0
    for v in string.gmatch(use, "%d+") do i = i + 1; sum[i] = math.min((sum[i] or 0) + tonumber(v), MAX_SUM) end
    for j = 1, #sum do sum[j] = string.format("%.0f", sum[j]) end
    use = table.concat(sum, ",")
  end
  local seq = cur[5] or "0"
  if pre then
    seq = tostring((tonumber(seq) or 0) + 1)
    pre = '{"seq":' .. seq .. ',' .. pre
  end
  local ev = ARGV[o + 8]
  if ev ~= "" then seq = tostring((tonumber(seq) or 0) + 1) end
  -- The worker goes in the common HSET when it changes (else write_id
  -- is named twice: no second command on the hot path).
  local wk, wv = F.write_id, ARGV[o + 2]
  if worker ~= "" and cur[14] ~= worker then wk, wv = F.worker, worker end
  if use ~= "" then
    redis.call("HSET", rec, F.write_id, ARGV[o + 2], wk, wv, F.attempts, a, F.seq, seq, F.usage, use, unpack(ARGV, last + 1))
  else
    redis.call("HSET", rec, F.write_id, ARGV[o + 2], wk, wv, F.attempts, a, F.seq, seq, unpack(ARGV, last + 1))
  end
  local created, outboxed = false, false
  if pre then
    local len = redis.call("RPUSH", hist, pre)
    if len > HEAD + TAIL then hist_trim(hist) end
    created = len == 1
    if cur[8] then redis.pcall("SPUBLISH", rec .. ":events", pre) end
    if notify and notify ~= "" and outbox then
      rec_outbox(rec, pre, outbox, due)
      outboxed = true
    end
  end
  if ev ~= "" then
    ev = '{"seq":' .. seq .. ',' .. ev
    local merged = nil
    if ARGV[o + 9] == "1" then merged = hist_merge(hist, ev) end
    if merged then
      ev = merged
    else
      local len = redis.call("RPUSH", hist, ev)
      if len > HEAD + TAIL then hist_trim(hist) end
      created = created or len == 1
    end
    if cur[8] then redis.pcall("SPUBLISH", rec .. ":events", ev) end
    if notify and notify ~= "" and outbox then
      rec_outbox(rec, ev, outbox, due)
      outboxed = true
    end
  end
  local fresh = redis.call("TTL", rec) >= tonumber(ARGV[o + 7])
  if not fresh then redis.call("EXPIRE", rec, ARGV[o + 6]) end
  if not fresh or created then redis.call("EXPIRE", hist, ARGV[o + 6]) end
  if not fresh and cur[11] then redis.call("EXPIRE", rec .. STEPS_SUFFIX, ARGV[o + 6]) end
  if not fresh and cur[13] then redis.call("EXPIRE", rec .. SIGNALS_SUFFIX, ARGV[o + 6]) end
  if not fresh and cur[12] then
    for _, sfx in ipairs(CHILDREN_SUFFIXES) do redis.call("EXPIRE", rec .. sfx, ARGV[o + 6]) end
  end
  if info then
    return {R.applied, attempts, tonumber(seq), outboxed and 1 or 0, tonumber(cur[11]) or 0, tonumber(cur[13]) or 0,
      info[1] or "", info[3] or "", ready, resumed and 1 or 0}
  end
  if n > 0 and cur[11] then return {R.applied, attempts, tonumber(seq), outboxed and 1 or 0, tonumber(cur[11])} end
  if outboxed then return {R.applied, attempts, tonumber(seq), 1} end
  return R.applied
end
