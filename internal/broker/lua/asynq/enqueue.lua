-- asynq/enqueue.lua: asynq v0.26's enqueueCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_enqueue(KEYS, ARGV).
-- asynq's enqueue of a task (its client's rdb.Enqueue): the task hash
-- and the pending list's entry, unless the task ID exists on the queue.
-- KEYS[1] task hash, KEYS[2] the queue's pending list
-- ARGV[1] encoded TaskMessage, ARGV[2] task ID, ARGV[3] now (Unix ns)
-- Returns 1 when enqueued, 0 when the task ID exists.
local function asynq_enqueue(KEYS, ARGV)
if redis.call("EXISTS", KEYS[1]) == 1 then
	return 0
end
redis.call("HSET", KEYS[1],
           "msg", ARGV[1],
           "state", "pending",
           "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
return 1

end
