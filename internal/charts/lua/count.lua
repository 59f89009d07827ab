-- count adds a worker's attempt counts to their minutes, and trims the
-- old minutes (after trim.lua).
--
--   KEYS[1] rkeys.ChartCounts, KEYS[2] rkeys.ChartMinutes
--   ARGV[1] the oldest unix minute kept; then triples: unix minute,
--           series (F.ok or F.fail), count to add (minutes older than
--           ARGV[1] are skipped)
--   returns the number of minutes trimmed
local oldest = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local m = ARGV[i]
  if tonumber(m) >= oldest then
    redis.call('HINCRBY', KEYS[1], m .. ':' .. ARGV[i + 1], ARGV[i + 2])
    redis.call('ZADD', KEYS[2], m, m)
  end
end
return trim(KEYS[1], KEYS[2], oldest)
