-- enqueue.lua: all of an Enqueue with a caller's ID in one step, where
-- every key lives on one server (not a Cluster): the duplicate check, the
-- run on its queue (agentq_run, internal/broker's), the task's entry in
-- the deadline index when it has a deadline, and the record (rec_create).
-- KEYS[1] task record, KEYS[2] history, KEYS[3] dead letters, KEYS[4..8]
-- agentq_run's keys (asynq's task hash, the run's list, the queue's wake
-- list, the fair dispatch's ready set and tenant registry), KEYS[9] the
-- deadline index (rkeys.Deadlines)
-- ARGV[1..9] agentq_run's arguments (message, asynq ID, time, kind, wake
-- cap, due channel, due announcement, tenant, priority code), ARGV[10] the
-- task's deadline (Unix ms; "0": none), ARGV[11..] rec_create's.
-- Returns {R.applied, state} when enqueued; {R.exists, state} for a
-- duplicate (a record, or a dead letter: "dead_lettered"); {R.stale, state
-- or ""} when the run was already queued (nothing written).
local st = redis.call("HGET", KEYS[1], F.state)
if st then return {R.exists, st} end
if redis.call("HEXISTS", KEYS[3], ARGV[11]) == 1 then return {R.exists, S.dead_lettered} end
if agentq_run(KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7],
    KEYS[7], KEYS[8], ARGV[8], ARGV[9]) == 0 then
  return {R.stale, redis.call("HGET", KEYS[1], F.state) or ""}
end
if ARGV[10] ~= "0" then redis.call("ZADD", KEYS[9], ARGV[10], ARGV[11]) end
rec_create(KEYS[1], KEYS[2], 11)
return {R.applied, ARGV[17]}
