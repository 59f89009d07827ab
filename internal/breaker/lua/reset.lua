-- reset closes the breaker. Needs the prelude.
--
-- KEYS[1] breaker hash, KEYS[2] trial leases, KEYS[3] rate window,
-- KEYS[4] failing tasks.
-- ARGV[1] event channel, ARGV[2] breaker key.
-- Returns the new generation. The window, the failing tasks and the
-- grown cooldown go too.
local state, gen = load(KEYS[1])
gen = gen + 1
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], F.state, C.closed, F.generation, gen, F.consecutive_failures, 0)
redis.call('HDEL', KEYS[1], F.open_until, F.cooldown)
announce(ARGV[1], ARGV[2], C.closed, gen, 0)
return gen
