-- cancel.lua: cancels a task (Store.Cancel): unless it has ended, its
-- record goes to state canceled, for good, and its history gains the
-- cancel's event. Every later write (rec_apply, requeue.lua) refuses a
-- canceled record.
-- KEYS[1] task record, KEYS[2] history, KEYS[3] webhook outbox, KEYS[4]
-- the webhooks' due set (absent on a Redis Cluster)
-- ARGV[1] event JSON, ARGV[2] error text, ARGV[3] time (RFC3339Nano),
-- ARGV[4] reason, ARGV[5] lifetime (s), ARGV[6] write ID
-- Returns {R.applied, previous state, run, queue, outboxed (1 when the
-- event went in the webhook outbox)} when canceled, and the
-- same with R.again when this write ID canceled it already; {R.missing}
-- when there is no record; {R.ended, state} when the task has already
-- ended (succeeded, dead_lettered, canceled): nothing is written then.
local cur = redis.call("HMGET", KEYS[1], F.state, F.run, F.queue, F.write_id, F.canceled_from, F.seq, F.watch, F.notify)
if not cur[1] then return {R.missing} end
if cur[4] == ARGV[6] then return {R.again, cur[5] or "", cur[2] or "0", cur[3] or ""} end
if TERMINAL(cur[1]) then return {R.ended, cur[1]} end
local seq = (tonumber(cur[6]) or 0) + 1
redis.call("HSET", KEYS[1], F.state, S.canceled, F.error_class, "", F.classified_by, "", F.error, ARGV[2], F.updated_at, ARGV[3],
  F.canceled_at, ARGV[3], F.cancel_reason, ARGV[4], F.canceled_from, cur[1], F.write_id, ARGV[6], F.seq, seq)
redis.call("HDEL", KEYS[1], F.next_attempt_at)
local _, outboxed = rec_event(KEYS[1], KEYS[2], ARGV[1], seq, "0", cur[7], cur[8], KEYS[3], KEYS[4])
redis.call("EXPIRE", KEYS[1], ARGV[5])
redis.call("EXPIRE", KEYS[2], ARGV[5])
redis.call("EXPIRE", KEYS[1] .. STEPS_SUFFIX, ARGV[5]) -- the steps hash (rkeys.TaskSteps), when there is one
redis.call("EXPIRE", KEYS[1] .. SIGNALS_SUFFIX, ARGV[5]) -- the signals hash (rkeys.TaskSignals), when there is one
for _, sfx in ipairs(CHILDREN_SUFFIXES) do -- a children wait's keys (rkeys.TaskChildren, TaskChildSpecs, TaskChildEnds)
  redis.call("EXPIRE", KEYS[1] .. sfx, ARGV[5])
end
return {R.applied, cur[1], cur[2] or "0", cur[3] or "", outboxed}
