-- requeue.lua: asynq's requeue of a shutting-down server's unfinished
-- delivery (asynq/requeue.lua) patched, run in its place: the run goes
-- back to the front of its lane (asynq's pending list for the default
-- lane; fair.go) with a wake token, so that another worker takes it at
-- once, and its tenant count is released. Built after lib/wake.lua,
-- lib/lane.lua and lib/release.lua. asynq_requeue's text is asynq's but
-- for its RPUSH: TestRequeueIsAsynqsPatched holds it to asynq's.
-- KEYS[1..4] asynq's (active, lease, pending, task hash), KEYS[5] the fair
-- ready set, KEYS[6] the tenant registry, KEYS[7..10] ReleaseKeys (in
-- flight, capped, ready, wake list)
-- ARGV[1] asynq's (the task ID), ARGV[2] the lane prefix
-- Returns asynq's reply: OK, or the error NOT FOUND.
local function asynq_requeue(KEYS, ARGV)
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
agentq_lane_push(KEYS[3], ARGV[2], KEYS[5], KEYS[6], KEYS[4], ARGV[1], true)
agentq_wake(KEYS[#KEYS], 1, C.wake_cap)
redis.call("HSET", KEYS[4], "state", "pending")
return redis.status_reply("OK")
end
return agentq_released(asynq_requeue, KEYS[4], true)
