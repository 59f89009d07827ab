-- forward.lua: asynq's forward (asynq/forward.lua) patched, run in its
-- place: it moves up to 100 due tasks of a scheduled or retry set, each to
-- the lane its task hash names (asynq's pending list for none; fair.go),
-- pushes a wake token per task moved, and replies when the set's next
-- task is due. Built after lib/wake.lua and lib/lane.lua. Its text is
-- asynq's but for two lines (the LPUSH and the reply):
-- TestForwardIsAsynqsPatched holds it to asynq's.
-- KEYS[1] the scheduled or retry set, KEYS[2] pending, KEYS[3] the queue's
-- wake list (rkeys.Wake; same slot), KEYS[4] the fair ready set, KEYS[5]
-- the tenant registry
-- ARGV[1..4] asynq's (now Unix s, task key prefix, now Unix ns, group key
-- prefix), ARGV[5] the wake list's cap, ARGV[6] the lane prefix
-- Returns {moved, earliest score left or -1}.
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, 100)
for _, id in ipairs(ids) do
	local taskKey = ARGV[2] .. id
	local group = redis.call("HGET", taskKey, "group")
	if group and group ~= '' then
	    redis.call("ZADD", ARGV[4] .. group, ARGV[1], id)
		redis.call("ZREM", KEYS[1], id)
		redis.call("HSET", taskKey,
				   "state", "aggregating")
	else
		agentq_lane_push(KEYS[2], ARGV[6], KEYS[4], KEYS[5], taskKey, id, false)
		redis.call("ZREM", KEYS[1], id)
		redis.call("HSET", taskKey,
				   "state", "pending",
				   "pending_since", ARGV[3])
	end
end
local n = table.getn(ids)
if n > 0 then agentq_wake(KEYS[3], n, tonumber(ARGV[5])) end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {n, first[2] or "-1"}
