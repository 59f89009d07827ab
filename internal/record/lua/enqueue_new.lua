-- enqueue_new.lua: Enqueues with generated IDs (96 random bits: no record
-- or dead letter to look for), one or more tasks in one step, where every
-- key lives on one server (not a Cluster). Each task gets what the
-- enqueue script (enqueue.lua) writes for a new task: the queue's
-- registration in asynq's set of queues, the run on its queue (agentq_run,
-- internal/broker's), the task's entry in the deadline index when it has
-- a deadline, and the record as rec_create writes a new one (its fields,
-- the first event with seq 1, both lifetimes), computed by the caller. It
-- runs without the record's prelude: it defines nothing it does not call.
-- Concurrent enqueues of one client meet here (Store.EnqueueNewCall's
-- merger): one script call carries them all.
-- KEYS: per task, in order, 9 keys: agentq_run's 5 (asynq's task hash,
-- the run's list, the queue's wake list, the fair dispatch's ready set and
-- tenant registry), asynq's set of queues, the task record, its history,
-- the deadline index (rkeys.Deadlines)
-- ARGV: per task, in order, a count n and then its n arguments: 1..9
-- agentq_run's (message, asynq ID, time, kind, wake cap, due channel, due
-- announcement, tenant, priority code), 10 the queue's name, 11 the
-- task's deadline (Unix ms; "0": none), 12 the task's ID, 13 the first
-- event's JSON (seq 1), 14 the lifetime of the record and its history
-- (s), 15 the task's state, 16..n the record's field/value pairs.
-- Returns per task, in order, {R.applied, state} when enqueued, or
-- {R.stale, ""} when asynq's task hash existed (nothing written but the
-- registration).
local out = {}
local a = 1
for k = 1, #KEYS, 9 do
  local n = tonumber(ARGV[a])
  redis.call("SADD", KEYS[k + 5], ARGV[a + 10])
  if agentq_run(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5]),
      ARGV[a + 6], ARGV[a + 7], KEYS[k + 3], KEYS[k + 4], ARGV[a + 8], ARGV[a + 9]) == 0 then
    out[#out + 1] = {R.stale, ""}
  else
    if ARGV[a + 11] ~= "0" then redis.call("ZADD", KEYS[k + 8], ARGV[a + 11], ARGV[a + 12]) end
    redis.call("HSET", KEYS[k + 6], unpack(ARGV, a + 16, a + n))
    redis.call("RPUSH", KEYS[k + 7], ARGV[a + 13])
    redis.call("EXPIRE", KEYS[k + 6], ARGV[a + 14])
    redis.call("EXPIRE", KEYS[k + 7], ARGV[a + 14])
    out[#out + 1] = {R.applied, ARGV[a + 15]}
  end
  a = a + n + 1
end
return out
