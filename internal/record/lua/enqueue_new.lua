-- enqueue_new.lua: Enqueues with generated IDs (96 random bits: no record
-- or dead letter to look for), one or more tasks in one step, where every
-- key lives on one server (not a Cluster). Each task gets what the
-- enqueue script (enqueue.lua) writes for a new task: the queue's
-- registration in asynq's set of queues, the run on its queue (agentq_run,
-- internal/broker's), the task's entry in the deadline index when it has
-- a deadline, and the record as rec_create writes a new one (its fields
-- and lifetime), computed by the caller, but for its first event (seq 1):
-- the record holds it (F.first, compact), and the history list is made by
-- the second (every script that makes it gives it its lifetime). It
-- runs without the record's prelude: it defines nothing it does not call.
-- Concurrent enqueues of one client meet here (Store.EnqueueNewCall's
-- merger): one script call carries them all, and pays once per call what
-- it can: one registration per queue, one push of wake-up tokens per wake
-- list for all its pending runs (agentq_wake, to the wake cap), and the
-- keys and values that consecutive tasks share (their group: the same
-- queue, lane, kind, state and lifetime) travel once per group: a task
-- carries two keys and its own values only. A group whose task hashes
-- all are new (one EXISTS for the group) writes them as agentq_run would
-- without a check each, and pushes its runs in one LPUSH (pending: the
-- order of one push per run) or ZADD (scheduled); a group where one
-- exists goes task by task through agentq_run. Tasks of one call have
-- distinct IDs (one met again in a fresh group is stale).
-- KEYS: 1 asynq's set of queues, 2 the deadline index (rkeys.Deadlines),
-- then per group, in order: agentq_run's list, wake list, fair dispatch's
-- ready set and tenant registry, then per task of the group, in order:
-- asynq's task hash, the task record.
-- ARGV: 1 the wake cap, 2 the due channel, then per group, in order, 7
-- values: 1 its number of tasks m, 2 the queue's name, 3 the runs' kind
-- ("pending", "scheduled"), 4 the tenant, 5 the priority code
-- (agentq_run's), 6 the tasks' state, 7 the lifetime of their records
-- (s); then per task of the group a count n and its n values: 1 the
-- run's message, 2 its asynq ID, 3 its time (pending: Unix ns; scheduled:
-- due, Unix s), 4 its due announcement, 5 the task's deadline (Unix ms;
-- "0": none), 6 the task's ID, 7 the first event (compact, as F.first
-- holds it), 8 the agent, 9 enqueued_at, 10..n the record's optional
-- field/value pairs (action and correlation_id when not empty among
-- them). The record's fixed field names are the script's own (the
-- schema's): only values travel.
-- Returns per task, in order, its code: R.applied when enqueued (in the
-- state its arguments name), R.stale when asynq's task hash existed
-- (nothing written but the registration).
local out = {}
local registered, tokens = {}, {}
local k, a = 3, 3
while a <= #ARGV do
  local list, w, ready, tenants = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local m, queue, kind, tenant, code = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local state, life = ARGV[a + 5], ARGV[a + 6]
  local pending = kind == "pending"
  k, a = k + 4, a + 7
  if not registered[queue] then
    redis.call("SADD", KEYS[1], queue)
    registered[queue] = true
  end
  -- A group whose task hashes are all new (the rule: the IDs are new) is
  -- written without a check per task, its runs pushed in one command.
  local hashes = {}
  for i = 1, m do hashes[i] = KEYS[k + 2 * (i - 1)] end
  local fresh = redis.call("EXISTS", unpack(hashes)) == 0
  local pushed, seen = {}, {}
  for _ = 1, m do
    local n, task, id = tonumber(ARGV[a]), KEYS[k], ARGV[a + 6]
    local ok
    if not fresh then
      ok = agentq_run(task, list, false, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], kind, 0, ARGV[2], ARGV[a + 4],
        ready, tenants, tenant, code) == 1
    elseif seen[task] then
      ok = false
    else
      seen[task] = true
      ok = true
      if pending then
        redis.call("HSET", task, "msg", ARGV[a + 1], "state", "pending", "pending_since", ARGV[a + 3])
        agentq_lane_fields(task, tenant, code)
        pushed[#pushed + 1] = ARGV[a + 2]
      else
        redis.call("HSET", task, "msg", ARGV[a + 1], "state", "scheduled")
        agentq_lane_fields(task, tenant, code)
        pushed[#pushed + 1] = ARGV[a + 3]
        pushed[#pushed + 1] = ARGV[a + 2]
        if ARGV[a + 4] ~= "" then redis.call("PUBLISH", ARGV[2], ARGV[a + 4]) end
      end
    end
    if ok then
      if pending then
        if tokens[w] then tokens[w] = tokens[w] + 1 else tokens[w] = 1; tokens[#tokens + 1] = w end
      end
      if ARGV[a + 5] ~= "0" then redis.call("ZADD", KEYS[2], ARGV[a + 5], id) end
      redis.call("HSET", KEYS[k + 1], F.agent, ARGV[a + 8], F.queue, queue, F.enqueued_at, ARGV[a + 9], F.state, state,
        F.run, "0", F.seq, "1", F.first, ARGV[a + 7], unpack(ARGV, a + 10, a + n))
      redis.call("EXPIRE", KEYS[k + 1], life)
      out[#out + 1] = R.applied
    else
      out[#out + 1] = R.stale
    end
    k, a = k + 2, a + n + 1
  end
  if #pushed > 0 then
    if not pending then
      redis.call("ZADD", list, unpack(pushed))
    elseif redis.call("LPUSH", list, unpack(pushed)) == #pushed and code ~= "" then
      agentq_lane_join(ready, tenants, tenant)
    end
  end
end
for _, t in ipairs(tokens) do agentq_wake(t, tokens[t], tonumber(ARGV[1])) end
return out
