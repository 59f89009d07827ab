-- window: rate mode's window functions, for the scripts that count in it
-- or read it (record, flush, snapshot), after the prelude. No KEYS or ARGV
-- of their own. The window is a hash of 10 ring buckets: b<i> the bucket
-- number, s<i> successes, f<i> failures; F.width the bucket width (ms).
--
-- window_add(k, wms, now, kind, n) adds n to the count kind ('s' or 'f')
-- of the current bucket of window k (window wms ms: buckets of
-- max(wms/10, 1) ms; a bucket of an earlier round is zeroed first), gives
-- k a TTL of twice the window and returns the bucket number.
-- window_sum(m, b) returns the calls and failures of the buckets of the
-- last 10 up to bucket b in m (the window's fields, numbers).
local function window_add(k, wms, now, kind, n)
  local w = math.max(math.floor(wms / 10), 1)
  local b = math.floor(now / w)
  local i = b % 10
  if tonumber(redis.call('HGET', k, 'b' .. i)) ~= b then
    redis.call('HSET', k, 'b' .. i, b, 's' .. i, 0, 'f' .. i, 0, F.width, w)
  end
  redis.call('HINCRBY', k, kind .. i, n)
  redis.call('PEXPIRE', k, wms * 2)
  return b
end
local function window_sum(m, b)
  local calls, fails = 0, 0
  for j = 0, 9 do
    local bj = m['b' .. j]
    if bj and bj > b - 10 then
      calls = calls + (m['s' .. j] or 0) + (m['f' .. j] or 0)
      fails = fails + (m['f' .. j] or 0)
    end
  end
  return calls, fails
end
