-- trim defines trim(h, idx, oldest), which the chart scripts end with: it
-- drops the minutes older than oldest (a unix minute) from the hash h
-- (rkeys.ChartCounts) and its index idx (rkeys.ChartMinutes), at most 500
-- per call (a call adds a few minutes: it catches up).
--
--   KEYS, ARGV: none of its own (the script it is part of passes them)
--   returns (the function) the number of minutes dropped
local function trim(h, idx, oldest)
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. oldest, 'LIMIT', 0, 500)
  for _, m in ipairs(old) do
    redis.call('HDEL', h, m .. ':' .. F.ok, m .. ':' .. F.fail, m .. ':' .. F.q)
  end
  if #old > 0 then redis.call('ZREM', idx, unpack(old)) end
  return #old
end
