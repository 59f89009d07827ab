-- snapshot reads a breaker. It writes nothing. Needs the prelude and
-- window.lua.
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
  calls, fails = window_sum(m, math.floor(now / w))
  ntasks = redis.call('ZCOUNT', KEYS[4], now - 10 * w, '+inf')
end
return {redis.call('HGETALL', KEYS[1]), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), calls, fails, ntasks}
