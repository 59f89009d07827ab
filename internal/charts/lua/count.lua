-- count adds one flush of a worker's attempt counts to their minutes,
-- once per flush number, and trims the old minutes (after trim.lua).
--
--   KEYS[1] rkeys.ChartCounts, KEYS[2] rkeys.ChartMinutes,
--   KEYS[3] rkeys.ChartFlushed(counter ID): the number of the counter's
--           last flush applied
--   ARGV[1] the flush's number (> every earlier flush's of the counter)
--   ARGV[2] the seconds KEYS[3] lives after this flush
--   ARGV[3] the oldest unix minute kept; then triples: unix minute,
--           series (F.ok or F.fail), count to add (minutes older than
--           ARGV[3] are skipped)
--   returns -1 when this flush (or a later one) was applied already (a
--   flush sent again after its reply was lost: nothing is added twice),
--   else the number of minutes trimmed
local seq = tonumber(ARGV[1])
local done = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if seq <= done then return -1 end
local oldest = tonumber(ARGV[3])
for i = 4, #ARGV, 3 do
  local m = ARGV[i]
  if tonumber(m) >= oldest then
    redis.call('HINCRBY', KEYS[1], m .. ':' .. ARGV[i + 1], ARGV[i + 2])
    redis.call('ZADD', KEYS[2], m, m)
  end
end
redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[2])
return trim(KEYS[1], KEYS[2], oldest)
