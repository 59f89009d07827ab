package broker

import "github.com/redis/go-redis/v9"

// The scripts an asynq v0.26 server runs that agentq's worker watches (see
// worker's asynq client): verbatim copies, recognised by their SHA-1 (the
// EVALSHA asynq sends). TestScriptsAreAsynqs holds them to asynq's source.
var (
	// AsynqDequeueScript is asynq's dequeueCmd: pop a pending task of one queue.
	// KEYS[1] pending, KEYS[2] paused, KEYS[3] active, KEYS[4] lease;
	// ARGV[1] lease expiry (Unix s), ARGV[2] task key prefix. Replies the
	// task's message, or nil (redis.Nil) when the queue is empty or paused.
	AsynqDequeueScript = redis.NewScript(asynqDequeueSource)
	// AsynqForwardScript is asynq's forwardCmd: move up to 100 due tasks of a
	// scheduled or retry set to pending. KEYS[1] the scheduled or retry set,
	// KEYS[2] pending; ARGV[1] now (Unix s), ARGV[2] task key prefix,
	// ARGV[3] now (Unix ns), ARGV[4] group key prefix. Replies the number moved.
	AsynqForwardScript = redis.NewScript(asynqForwardSource)
	// AsynqRetryScript is asynq's retryCmd: active to the retry set. KEYS[4] is
	// the retry set; ARGV[3] the time the retry is due (Unix s).
	AsynqRetryScript = redis.NewScript(asynqRetrySource)
	// AsynqRequeueScript is asynq's requeueCmd: active back to pending (a
	// shutting-down server's unfinished tasks). KEYS[3] is the pending list.
	AsynqRequeueScript = redis.NewScript(asynqRequeueSource)
	// AsynqDoneScript is asynq's doneCmd: acknowledge a task that succeeded
	// (active and lease entries and the task hash deleted, processed
	// counters raised). KEYS[1] active, KEYS[2] lease, KEYS[3] the task
	// hash, KEYS[4] today's processed counter, KEYS[5] the processed total;
	// ARGV[1] task ID, ARGV[2] the counter's expiry (Unix s), ARGV[3] the
	// total's wrap-around value. Replies OK, or the error NOT FOUND.
	AsynqDoneScript = redis.NewScript(asynqDoneSource)
)

const asynqDoneSource = `
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("DEL", KEYS[3]) == 0 then
  return redis.error_reply("NOT FOUND")
end
local n = redis.call("INCR", KEYS[4])
if tonumber(n) == 1 then
	redis.call("EXPIREAT", KEYS[4], ARGV[2])
end
local total = redis.call("GET", KEYS[5])
if tonumber(total) == tonumber(ARGV[3]) then
	redis.call("SET", KEYS[5], 1)
else
	redis.call("INCR", KEYS[5])
end
return redis.status_reply("OK")
`

const asynqDequeueSource = `
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
return nil`

const asynqForwardSource = `
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
return table.getn(ids)`

const asynqRetrySource = `
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
return redis.status_reply("OK")`

const asynqRequeueSource = `
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending")
return redis.status_reply("OK")`
