-- lib/release.lua: defines the release of a run's tenant count, which the
-- scripts that take a run out of asynq's active list include (done.lua,
-- retry.lua, requeue.lua; internal/record's apply_acked through DoneLua).
-- It needs lib/wake.lua before it.
--
--   - agentq_counted(task): the tenant the dequeue counted the run of task
--     hash task for (its F.counted; nil: none), read before asynq's
--     script deletes the hash.
--   - agentq_release(t, inflight, capped, ready): a run the dequeue
--     counted for tenant t (nil: not counted) left asynq's active list, so
--     t's in-flight count is lowered and t, if it waited at its cap, goes
--     back to the ready set at its pass. Returns 1 when t was capped (a
--     worker should be woken for it), else 0.
--   - agentq_release_wake(t, inflight, capped, ready, wake): agentq_release,
--     and a wake token on the queue's wake list when it moved t back to
--     the ready set.
--   - agentq_released(asynq, task, drop): runs asynq(KEYS, ARGV), one of
--     asynq's scripts as a function, for the run whose task hash is task,
--     and when it succeeded releases the run's count (the release's keys
--     are the script's last four) and, with drop, removes the count's mark
--     from the task hash (which lives on); returns asynq's reply.
-- KEYS, ARGV: none of its own (the callers pass ReleaseKeys: in flight,
-- capped, ready, wake list).
local function agentq_release(t, inflight, capped, ready)
  if not t then return 0 end
  if redis.call("HINCRBY", inflight, t, -1) <= 0 then redis.call("HDEL", inflight, t) end
  local p = redis.call("ZSCORE", capped, t)
  if not p then return 0 end
  redis.call("ZREM", capped, t)
  redis.call("ZADD", ready, p, t)
  return 1
end
local function agentq_counted(task)
  return redis.call("HGET", task, F.counted)
end
local function agentq_release_wake(t, inflight, capped, ready, wake)
  if agentq_release(t, inflight, capped, ready) == 1 then agentq_wake(wake, 1, C.wake_cap) end
end
local function agentq_released(asynq, task, drop)
  local t = agentq_counted(task)
  local r = asynq(KEYS, ARGV)
  if type(r) == "table" and r.err then return r end
  if drop and t then redis.call("HDEL", task, F.counted) end
  local n = #KEYS
  agentq_release_wake(t, KEYS[n - 3], KEYS[n - 2], KEYS[n - 1], KEYS[n])
  return r
end
