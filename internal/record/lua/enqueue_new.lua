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
-- merger): one script call carries them all, and pays once per call what
-- it can: one registration per queue, and one push of wake-up tokens per
-- wake list for all its pending runs (agentq_wake, to the wake cap of
-- the first task's arguments).
-- KEYS: per task, in order, 9 keys: agentq_run's 5 (asynq's task hash,
-- the run's list, the queue's wake list, the fair dispatch's ready set and
-- tenant registry), asynq's set of queues, the task record, its history,
-- the deadline index (rkeys.Deadlines)
-- ARGV[1] the wake cap, ARGV[2] the due channel, then per task, in order,
-- a count n and its n arguments: 1 the run's message, 2 its asynq ID, 3
-- its time (pending: Unix ns; scheduled: due, Unix s), 4 its kind
-- ("pending", "scheduled"), 5 its due announcement, 6 its tenant, 7 its
-- priority code (agentq_run's), 8 the queue's name, 9 the task's deadline
-- (Unix ms; "0": none), 10 the task's ID, 11 the first event's JSON (seq
-- 1), 12 the lifetime of the record and its history (s), 13 the task's
-- state, 14 agent, 15 action, 16 enqueued_at, 17 correlation ID, 18..n
-- the record's optional field/value pairs. The record's field names are
-- the script's own (the schema's): only values travel.
-- Returns per task, in order, its code: R.applied when enqueued (in the
-- state its arguments name), R.stale when asynq's task hash existed
-- (nothing written but the registration).
local out = {}
local registered, tokens = {}, {}
local a = 3
for k = 1, #KEYS, 9 do
  local n = tonumber(ARGV[a])
  local queue, id, life = ARGV[a + 8], ARGV[a + 10], ARGV[a + 12]
  if not registered[queue] then
    redis.call("SADD", KEYS[k + 5], queue)
    registered[queue] = true
  end
  if agentq_run(KEYS[k], KEYS[k + 1], false, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], 0,
      ARGV[2], ARGV[a + 5], KEYS[k + 3], KEYS[k + 4], ARGV[a + 6], ARGV[a + 7]) == 0 then
    out[#out + 1] = R.stale
  else
    if ARGV[a + 4] == "pending" then
      local w = KEYS[k + 2]
      if tokens[w] then tokens[w] = tokens[w] + 1 else tokens[w] = 1; tokens[#tokens + 1] = w end
    end
    if ARGV[a + 9] ~= "0" then redis.call("ZADD", KEYS[k + 8], ARGV[a + 9], id) end
    redis.call("HSET", KEYS[k + 6], F.id, id, F.agent, ARGV[a + 14], F.action, ARGV[a + 15], F.queue, queue,
      F.enqueued_at, ARGV[a + 16], F.correlation_id, ARGV[a + 17], F.state, ARGV[a + 13], F.run, "0", F.seq, "1",
      unpack(ARGV, a + 18, a + n))
    redis.call("RPUSH", KEYS[k + 7], ARGV[a + 11])
    redis.call("EXPIRE", KEYS[k + 6], life)
    redis.call("EXPIRE", KEYS[k + 7], life)
    out[#out + 1] = R.applied
  end
  a = a + n + 1
end
for _, w in ipairs(tokens) do agentq_wake(w, tokens[w], tonumber(ARGV[1])) end
return out
