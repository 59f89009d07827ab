-- signal.lua: records a signal sent to a task (Store.Signal): its data in
-- the task's signals hash under its name, the record's signal count and a
-- history event signal (announced, and in the webhook outbox, like every
-- event), and says whether the task waits for it. A signal is kept for
-- the task's life, waited for or not: a run that suspends later for a
-- signal already sent resumes at once (rec_apply's ready).
-- KEYS[1] task record, KEYS[2] history, KEYS[3] signals hash
-- (rkeys.TaskSignals), KEYS[4] webhook outbox, KEYS[5] the webhooks' due
-- set (absent on a Redis Cluster)
-- ARGV[1] the signal's name, ARGV[2] its data (JSON), ARGV[3] the signal
-- event's JSON (without seq), ARGV[4] the most signals a task keeps
-- (MaxSignals)
-- Returns {R.applied, state, resume, run, queue, signals, outboxed}:
-- state, the task's state; resume 1 when the task waits (state waiting)
-- for this signal: its run (the record's run, waiting in asynq's
-- scheduled set of queue) is to be made pending by the caller; signals,
-- the task's count now; outboxed 1 when the event went in the webhook
-- outbox. {R.again, state, resume, run, queue, signals}: a signal of this
-- name was sent already (the first is kept, nothing written), resume as
-- above, so that a sender that retries completes a resume a crash cut.
-- Writing nothing: {R.missing} (no record), {R.ended, state} (the task
-- has ended: succeeded, dead_lettered or canceled), {R.cap, limit} (the
-- task has MaxSignals signals).
-- The signals hash gets the record's remaining lifetime; the scripts that
-- set the record's lifetime later (rec_apply, cancel.lua, requeue.lua)
-- set the signals hash's too.
local cur = redis.call("HMGET", KEYS[1], F.state, F.run, F.queue, F.seq, F.signals, F.watch, F.notify, F.wait_signal)
local state = cur[1]
if not state then return {R.missing} end
if TERMINAL(state) then return {R.ended, state} end
local n = tonumber(cur[5]) or 0
local resume = 0
if state == S.waiting and cur[8] == ARGV[1] then resume = 1 end
local run, queue = tonumber(cur[2]) or 0, cur[3] or ""
if redis.call("HEXISTS", KEYS[3], ARGV[1]) == 1 then return {R.again, state, resume, run, queue, n} end
if n >= tonumber(ARGV[4]) then return {R.cap, tonumber(ARGV[4])} end
local seq = (tonumber(cur[4]) or 0) + 1
redis.call("HSET", KEYS[3], ARGV[1], ARGV[2])
redis.call("HSET", KEYS[1], F.seq, seq, F.signals, n + 1)
local _, outboxed = rec_event(KEYS[1], KEYS[2], ARGV[3], seq, "0", cur[6], cur[7], KEYS[4], KEYS[5])
local ttl = redis.call("TTL", KEYS[1])
if ttl > 0 then redis.call("EXPIRE", KEYS[3], ttl) end
if ttl > 0 and redis.call("TTL", KEYS[2]) < ttl then redis.call("EXPIRE", KEYS[2], ttl) end
return {R.applied, state, resume, run, queue, n + 1, outboxed}
