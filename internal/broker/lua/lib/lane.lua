-- lib/lane.lua: defines the functions that put a run in its lane (fair.go).
-- The scripts that make a run pending include it: the producers' run
-- (agentq_run), the forward of the scheduled and retry sets, the requeue
-- and the run-now of a deferred run.
--
--   - agentq_lane_fields(task, tenant, code): the task hash carries the
--     run's lane (code "": the default lane, nothing written).
--   - agentq_lane_join(ready, tenants, tenant): a tenant with a run in a
--     lane joins the ready set at pass 0 unless it is there (a tenant
--     that joins is served next) and, when it joined, the tenant registry
--     (a tenant in the ready set is in the registry: the repair prunes
--     only tenants in neither set).
--   - agentq_lane_push(pending, prefix, ready, tenants, task, id, front):
--     push run id onto the lane its task hash names (asynq's pending list
--     for none), behind the others (LPUSH, a new run) or, front, ahead of
--     them (RPUSH, as asynq's requeue does).
--
-- A push onto a lane that already had runs does not join: a tenant with a
-- run in a lane is in the ready or the capped set already (every script
-- that empties a lane or moves a tenant between the sets keeps that so; the
-- repair puts back a tenant that is in neither), so the join is paid once
-- per run of a tenant's lane, not per run.
-- KEYS, ARGV: none of its own (the callers pass the keys above).
-- Returns: the functions return nothing.
local function agentq_lane_fields(task, tenant, code)
  if code ~= "" then redis.call("HSET", task, F.tenant, tenant, F.priority, code) end
end
local function agentq_lane_join(ready, tenants, tenant)
  if redis.call("ZADD", ready, "NX", "0", tenant) == 1 then redis.call("SADD", tenants, tenant) end
end
local function agentq_lane_push(pending, prefix, ready, tenants, task, id, front)
  local cmd = "LPUSH"
  if front then cmd = "RPUSH" end
  local f = redis.call("HMGET", task, F.tenant, F.priority)
  local t, c = f[1] or "", f[2] or "n"
  if t == "" and c == "n" then
    redis.call(cmd, pending, id)
    return
  end
  if redis.call(cmd, prefix .. c .. ":" .. t, id) == 1 then agentq_lane_join(ready, tenants, t) end
end
