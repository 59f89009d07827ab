-- reserve puts a task in the restart index, bounded by max_pending, in one
-- atomic step (so concurrent workers cannot overshoot the bound).
--
-- KEYS[1] restart index (rkeys.RestartPending).
-- ARGV[1] task id, ARGV[2] due time (unix ms), ARGV[3] max_pending (0:
-- unbounded).
-- Returns {1, size} when id is in the index now (added, or already there:
-- its due time is updated), {0, size} when the index is full.
local max = tonumber(ARGV[3])
if max > 0 and not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  local n = redis.call("ZCARD", KEYS[1])
  if n >= max then return {0, n} end
end
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
return {1, redis.call("ZCARD", KEYS[1])}
