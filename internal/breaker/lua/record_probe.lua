-- record_probe.lua: stores one health probe's result (Breakers.RecordProbe).
-- The field F.recent keeps the last ARGV[5] outcomes as a string of 1s and
-- 0s (oldest first).
-- KEYS[1] the breaker key's probe hash (rkeys.Probe)
-- ARGV[1] now ms, or "" for the Redis server's TIME; ARGV[2] "1" healthy,
-- "0" not; ARGV[3] latency ms; ARGV[4] error text; ARGV[5] the window
-- (ProbeWindow)
-- Returns the time stored as F.last_at (ms).
local now = now_ms(ARGV[1])
local recent = (redis.call('HGET', KEYS[1], F.recent) or '') .. ARGV[2]
local w = tonumber(ARGV[5])
if #recent > w then recent = string.sub(recent, #recent - w + 1) end
redis.call('HSET', KEYS[1], F.last_at, now, F.last_ok, ARGV[2], F.latency_ms, ARGV[3], F.error, ARGV[4], F.recent, recent)
return now
