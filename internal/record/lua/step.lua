-- step.lua: records one step of a task's agent (Store.Step): its data in
-- the task's steps hash under its name, the record's step count, bytes
-- and usage sum, and a history event step, fenced like the checked write
-- (rec_apply): only while the delivery's run is current and has not
-- ended, and the task is not canceled.
-- KEYS[1] task record, KEYS[2] history, KEYS[3] steps hash
-- (rkeys.TaskSteps), KEYS[4] webhook outbox and KEYS[5] the webhooks' due
-- set (both absent when the write came without rec_outbox's keys; KEYS[5]
-- absent on a Redis Cluster)
-- ARGV[1] the delivery's run, ARGV[2] the step's name, ARGV[3] its data
-- (JSON), ARGV[4] the step event's JSON (without seq), ARGV[5] the usage
-- to add to the task's sum (F.usage, FormatUsageSum; "" for none),
-- ARGV[6] the most steps a task keeps (MaxSteps), ARGV[7] the most bytes
-- of one step's data (MaxStepBytes), ARGV[8] the most bytes of a task's
-- step data (MaxStepsBytes), ARGV[9] lifetime (s), ARGV[10] the remaining
-- lifetime that needs no refresh (s)
-- Returns {R.applied, steps, outboxed} (steps: the task's count now;
-- outboxed: 1 when the event went in the webhook outbox), or, writing
-- nothing: {R.again, steps} (a step of this name is recorded already: the
-- first is kept), {R.cap, cap, limit} (cap: "steps", "step_bytes" or
-- "task_bytes", the cap the step would go over), {R.canceled},
-- {R.stale} (a newer run), {R.ended} (the run has ended), {R.missing}
-- (no record) or {R.outbox} (the record names webhooks and the write came
-- without the outbox's keys: send it again with them).
-- The steps hash gets the record's remaining lifetime when this step
-- creates it or refreshes the record's (rec_expire); the scripts that set the record's lifetime later
-- (rec_apply, cancel.lua, requeue.lua) set the steps hash's too.

-- add_usage(sum, use): the usage sum sum (F.usage; nil: none yet) plus
-- use, number by number, each saturating at MAX_SUM (as rec_apply adds).
local function add_usage(sum, use)
  if not sum or sum == "" then return use end
  local s, i = {}, 0
  for v in string.gmatch(sum, "%d+") do i = i + 1; s[i] = tonumber(v) end
  i = 0
  for v in string.gmatch(use, "%d+") do i = i + 1; s[i] = math.min((s[i] or 0) + tonumber(v), MAX_SUM) end
  for j = 1, #s do s[j] = string.format("%.0f", s[j]) end
  return table.concat(s, ",")
end

-- over_cap(n, bytes, size): the cap reply ({R.cap, cap, limit}) a step of
-- size bytes would go over, with n steps of bytes recorded; nil if none.
local function over_cap(n, bytes, size)
  if size > tonumber(ARGV[7]) then return {R.cap, "step_bytes", tonumber(ARGV[7])} end
  if n >= tonumber(ARGV[6]) then return {R.cap, "steps", tonumber(ARGV[6])} end
  if bytes + size > tonumber(ARGV[8]) then return {R.cap, "task_bytes", tonumber(ARGV[8])} end
  return nil
end

local cur = redis.call("HMGET", KEYS[1], F.run, F.state, F.seq, F.steps, F.steps_bytes, F.watch, F.notify, F.usage)
if not cur[2] then return {R.missing} end
if cur[2] == S.canceled then return {R.canceled} end
local run, d = tonumber(cur[1] or "0"), tonumber(ARGV[1])
if run > d then return {R.stale} end
if run == d and TERMINAL(cur[2]) then return {R.ended} end
local n, bytes = tonumber(cur[4]) or 0, tonumber(cur[5]) or 0
local over = over_cap(n, bytes, #ARGV[3])
if over then
  -- A name recorded already is "again" even at a cap.
  if redis.call("HEXISTS", KEYS[3], ARGV[2]) == 1 then return {R.again, n} end
  return over
end
if cur[7] and cur[7] ~= "" and not KEYS[4] then return {R.outbox} end
-- HSETNX is the check for a name recorded already and the write at once.
if redis.call("HSETNX", KEYS[3], ARGV[2], ARGV[3]) == 0 then return {R.again, n} end
local size = #ARGV[3]
local seq = (tonumber(cur[3]) or 0) + 1
if ARGV[5] ~= "" then
  redis.call("HSET", KEYS[1], F.seq, seq, F.steps, n + 1, F.steps_bytes, bytes + size, F.usage, add_usage(cur[8], ARGV[5]))
else
  redis.call("HSET", KEYS[1], F.seq, seq, F.steps, n + 1, F.steps_bytes, bytes + size)
end
local len, outboxed = rec_event(KEYS[1], KEYS[2], ARGV[4], seq, "0", cur[6], cur[7], KEYS[4], KEYS[5])
local fresh, ttl = rec_expire(KEYS[1], KEYS[2], ARGV[9], tonumber(ARGV[10]), len == 1)
-- The steps hash lives as long as the record: set when this step created
-- it (n == 0) or the record's lifetime was refreshed; else it has it.
if (n == 0 or not fresh) and ttl > 0 then redis.call("EXPIRE", KEYS[3], ttl) end
return {R.applied, n + 1, outboxed}
