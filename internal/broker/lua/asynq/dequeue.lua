-- asynq/dequeue.lua: asynq v0.26's dequeueCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_dequeue(KEYS, ARGV).
-- asynq's dequeue of one queue: pop a pending task into the active list
-- with a lease. agentq runs the fair dequeue (dequeue.lua) in its place.
-- KEYS[1] pending, KEYS[2] paused, KEYS[3] active, KEYS[4] lease
-- ARGV[1] lease expiry (Unix s), ARGV[2] task key prefix
-- Returns the task's message, or nil when the queue is empty or paused.
local function asynq_dequeue(KEYS, ARGV)
if redis.call("EXISTS", KEYS[2]) == 0 then
	local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
	if id then
		local key = ARGV[2] .. id
		redis.call("HSET", key, "state", "active")
		redis.call("HDEL", key, "pending_since")
		redis.call("ZADD", KEYS[4], ARGV[1], id)
		return redis.call("HGET", key, "msg")
	end
end
return nil
end
