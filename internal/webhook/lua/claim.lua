-- claim claims due tasks. It first puts the tasks whose lease has expired
-- (a worker died or stalled) back in the due set (due now), then moves up
-- to ARGV[3] due tasks that no live lease holds, earliest score first, to
-- the leased set, with the expiry now + lease (the lease's token). A task
-- is due when its score is at most now or the server's TIME (a new event
-- is scored by the server's clock: a worker whose clock is behind it
-- still sees the event due).
--
-- KEYS[1] due set, KEYS[2] leased set.
-- ARGV[1] now ms, ARGV[2] lease ms, ARGV[3] the most tasks.
-- Returns {pending, id1, id2, …}: pending is the number of tasks in both
-- sets.
local now, lease, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local due_by = math.max(now, now_ms(""))
local lost = redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", now, "LIMIT", 0, 100)
for _, id in ipairs(lost) do
  redis.call("ZREM", KEYS[2], id)
  redis.call("ZADD", KEYS[1], "LT", now, id)
end
local out = {0}
local cand = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", due_by, "LIMIT", 0, limit * 4)
for _, id in ipairs(cand) do
  if #out > limit then break end
  if not redis.call("ZSCORE", KEYS[2], id) then
    redis.call("ZREM", KEYS[1], id)
    redis.call("ZADD", KEYS[2], now + lease, id)
    out[#out + 1] = id
  end
end
out[1] = redis.call("ZCARD", KEYS[1]) + redis.call("ZCARD", KEYS[2])
return out
