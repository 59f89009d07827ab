-- asynq/requeue.lua: asynq v0.26's requeueCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_requeue(KEYS, ARGV).
-- asynq's requeue of a shutting-down server's unfinished delivery:
-- active back to the front of pending. agentq runs requeue.lua, this
-- patched, in its place.
-- KEYS[1] active, KEYS[2] lease, KEYS[3] pending, KEYS[4] task hash
-- ARGV[1] task ID
-- Returns OK, or the error NOT FOUND (the delivery is no longer active).
local function asynq_requeue(KEYS, ARGV)
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending")
return redis.status_reply("OK")
end
