-- window.lua: counts one failure of an agent in the fleet-wide window and
-- says whether this call raises the window's alert (Alerter.Failure).
-- The window is [now - now mod window, +window) on one clock for the
-- fleet. A hash from an earlier window is reset; the hash expires two
-- windows after its last failure. The count reaches the threshold once per
-- window, so exactly one call in the fleet gets raise = 1.
-- KEYS[1] the agent's window hash (rkeys.AlertWindow): F.start (the
-- window's start, ms) and F.count
-- ARGV[1] the window's length in ms; ARGV[2] the threshold; ARGV[3] now
-- in ms, or "" for the Redis server's TIME
-- Returns {the count in the window including this failure, 1 when this
-- call raises the alert (the count reached exactly the threshold) else 0,
-- the window's start ms}.
local now = now_ms(ARGV[3])
local w = tonumber(ARGV[1])
local start = now - (now % w)
local cur = tonumber(redis.call('HGET', KEYS[1], F.start) or '-1')
if cur < start then
  redis.call('HSET', KEYS[1], F.start, start, F.count, 0)
else
  start = cur
end
local n = redis.call('HINCRBY', KEYS[1], F.count, 1)
redis.call('PEXPIRE', KEYS[1], 2 * w)
local raise = 0
if n == tonumber(ARGV[2]) then raise = 1 end
return {n, raise, start}
