-- asynq/forward.lua: asynq v0.26's forwardCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_forward(KEYS, ARGV).
-- asynq's forward: move up to 100 due tasks of a scheduled or retry set
-- to pending (or to their group). agentq runs forward.lua, this patched,
-- in its place.
-- KEYS[1] the scheduled or retry set, KEYS[2] pending
-- ARGV[1] now (Unix s), ARGV[2] task key prefix, ARGV[3] now (Unix ns),
-- ARGV[4] group key prefix
-- Returns the number of tasks moved.
local function asynq_forward(KEYS, ARGV)
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
		redis.call("LPUSH", KEYS[2], id)
		redis.call("ZREM", KEYS[1], id)
		redis.call("HSET", taskKey,
				   "state", "pending",
				   "pending_since", ARGV[3])
	end
end
return table.getn(ids)
end
