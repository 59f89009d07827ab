-- asynq/schedule.lua: asynq v0.26's scheduleCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_schedule(KEYS, ARGV).
-- asynq's schedule of a task (its client's rdb.Schedule): the task hash
-- and the scheduled set's entry, unless the task ID exists on the queue.
-- KEYS[1] task hash, KEYS[2] the queue's scheduled set
-- ARGV[1] encoded TaskMessage, ARGV[2] process-at (Unix s, the score),
-- ARGV[3] task ID
-- Returns 1 when scheduled, 0 when the task ID exists.
local function asynq_schedule(KEYS, ARGV)
if redis.call("EXISTS", KEYS[1]) == 1 then
	return 0
end
redis.call("HSET", KEYS[1],
           "msg", ARGV[1],
           "state", "scheduled")
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
return 1

end
