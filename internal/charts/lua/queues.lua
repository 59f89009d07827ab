-- queues sets a minute's queue sizes, and trims the old minutes (after
-- trim.lua).
--
--   KEYS[1] rkeys.ChartCounts, KEYS[2] rkeys.ChartMinutes
--   ARGV[1] the oldest unix minute kept, ARGV[2] the unix minute,
--   ARGV[3] "pending active scheduled retry"
--   returns the number of minutes trimmed
local oldest = tonumber(ARGV[1])
if tonumber(ARGV[2]) >= oldest then
  redis.call('HSET', KEYS[1], ARGV[2] .. ':' .. F.q, ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[2])
end
return trim(KEYS[1], KEYS[2], oldest)
