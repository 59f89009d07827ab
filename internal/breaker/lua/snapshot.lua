-- snapshot reads a breaker. It writes nothing. Needs the prelude.
--
-- KEYS[1] breaker hash, KEYS[2] trial leases, KEYS[3] rate window,
-- KEYS[4] failing tasks.
-- ARGV[1] now ms or "".
-- Returns {HGETALL of the hash (flat field/value list), number of
-- unexpired trial leases, window calls, window failures, failing tasks in
-- the window}.
local now = now_ms(ARGV[1])
local calls, fails, ntasks = 0, 0, 0
local h = redis.call('HGETALL', KEYS[3])
local m = {}
for j = 1, #h, 2 do m[h[j]] = tonumber(h[j + 1]) end
local w = m[F.width]
if w and w > 0 then
  local b = math.floor(now / w)
  for j = 0, 9 do
    local bj = m['b' .. j]
    if bj and bj > b - 10 then
      calls = calls + (m['s' .. j] or 0) + (m['f' .. j] or 0)
      fails = fails + (m['f' .. j] or 0)
    end
  end
  ntasks = redis.call('ZCOUNT', KEYS[4], now - 10 * w, '+inf')
end
return {redis.call('HGETALL', KEYS[1]), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), calls, fails, ntasks}
