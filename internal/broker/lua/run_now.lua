-- run_now.lua: move a run from the scheduled or retry set to its lane now
-- (asynq's pending list for the default lane), as the forward does when it
-- is due (RunNow). Built after lib/lane.lua.
-- KEYS[1] the run's task hash, KEYS[2] the set it waits in, KEYS[3]
-- asynq's pending list, KEYS[4] the ready set, KEYS[5] the tenant registry
-- ARGV[1] run ID, ARGV[2] lane prefix, ARGV[3] now (Unix ns)
-- Returns 1 when moved, 0 when the run is not in the set.
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then return 0 end
agentq_lane_push(KEYS[3], ARGV[2], KEYS[4], KEYS[5], KEYS[1], ARGV[1], false)
redis.call("HSET", KEYS[1], "state", "pending", "pending_since", ARGV[3])
return 1
