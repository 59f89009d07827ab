-- flush adds batched successes. Needs the prelude and window.lua.
--
-- KEYS[1] breaker hash, KEYS[2] rate mode's window.
-- ARGV[1] now ms or "", ARGV[2] number of successes, ARGV[3] the window
-- ms (0: consecutive mode).
-- Returns the new success_count. In rate mode a CLOSED breaker's window
-- counts them too, in the current bucket.
local now = now_ms(ARGV[1])
local n, wms = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HSET', KEYS[1], F.last_success_at, now)
if wms > 0 and (redis.call('HGET', KEYS[1], F.state) or C.closed) == C.closed then
  window_add(KEYS[2], wms, now, 's', n)
end
return redis.call('HINCRBY', KEYS[1], F.success_count, n)
