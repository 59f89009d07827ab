-- lib/run.lua: defines agentq_run(task, list, wake, msg, id, at, kind, cap,
-- channel, due, ready, tenants, tenant, code): asynq's enqueue of a task
-- (asynq/enqueue.lua, or for kind "scheduled" asynq/schedule.lua: the same
-- writes, held to them by TestRunScriptWritesAsynqs), plus the wake-up a
-- pending task needs (a token on its queue's wake list) or the
-- announcement a scheduled one needs (due, published on channel, when not
-- ""; a caller that pushes the tokens of several runs at once passes wake
-- false). A run of a lane other than the default (code not "": see fair.go)
-- waits in its lane (list is the lane's key), its task hash names the
-- lane, and its tenant joins the ready set when the lane was empty (see
-- lib/lane.lua). It needs lib/wake.lua and lib/lane.lua before it; run.lua
-- and internal/record's enqueue (RunLua) include it.
-- KEYS, ARGV: none of its own (run.lua documents the caller's).
-- Returns (the function) 1 when written, 0 when a task with that ID
-- exists on the queue.
local function agentq_run(task, list, wake, msg, id, at, kind, cap, channel, due, ready, tenants, tenant, code)
  if redis.call("EXISTS", task) == 1 then
    return 0
  end
  if kind == "pending" then
    if code ~= "" then
      redis.call("HSET", task, "msg", msg, "state", "pending", "pending_since", at, F.tenant, tenant, F.priority, code)
    else
      redis.call("HSET", task, "msg", msg, "state", "pending", "pending_since", at)
    end
    if redis.call("LPUSH", list, id) == 1 and code ~= "" then agentq_lane_join(ready, tenants, tenant) end
    if wake then agentq_wake(wake, 1, cap) end
  else
    redis.call("HSET", task, "msg", msg, "state", "scheduled")
    agentq_lane_fields(task, tenant, code)
    redis.call("ZADD", list, at, id)
    if due ~= "" then
      redis.call("PUBLISH", channel, due)
    end
  end
  return 1
end
