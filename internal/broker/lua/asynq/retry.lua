-- asynq/retry.lua: asynq v0.26's retryCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_retry(KEYS, ARGV).
-- asynq's retry: a delivery leaves the active list and its lease for the
-- retry set, its message rewritten; with ARGV[5] = 1 the failure is
-- counted. retry.lua runs it with the release of the run's tenant count.
-- KEYS[1] task hash, KEYS[2] active, KEYS[3] lease, KEYS[4] retry set,
-- KEYS[5] today's processed counter, KEYS[6] today's failed counter,
-- KEYS[7] processed total, KEYS[8] failed total
-- ARGV[1] task ID, ARGV[2] encoded TaskMessage, ARGV[3] retry due (Unix s),
-- ARGV[4] the counters' expiry (Unix s), ARGV[5] 1 to count it a failure,
-- ARGV[6] the totals' wrap-around value
-- Returns OK, or the error NOT FOUND (the delivery is no longer active).
local function asynq_retry(KEYS, ARGV)
if redis.call("LREM", KEYS[2], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[3], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "retry")
if tonumber(ARGV[5]) == 1 then
	local n = redis.call("INCR", KEYS[5])
	if tonumber(n) == 1 then
		redis.call("EXPIREAT", KEYS[5], ARGV[4])
	end
	local m = redis.call("INCR", KEYS[6])
	if tonumber(m) == 1 then
		redis.call("EXPIREAT", KEYS[6], ARGV[4])
	end
    local total = redis.call("GET", KEYS[7])
    if tonumber(total) == tonumber(ARGV[6]) then
    	redis.call("SET", KEYS[7], 1)
    	redis.call("SET", KEYS[8], 1)
    else
    	redis.call("INCR", KEYS[7])
    	redis.call("INCR", KEYS[8])
    end
end
return redis.status_reply("OK")
end
