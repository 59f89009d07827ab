-- trip opens the breaker until now+d (manual override). Needs the
-- prelude.
--
-- KEYS[1] breaker hash, KEYS[2] trial leases.
-- ARGV[1] now ms or "", ARGV[2] d in ms, ARGV[3] event channel,
-- ARGV[4] breaker key.
-- Returns {generation, open_until ms}.
local now = now_ms(ARGV[1])
local state, gen = load(KEYS[1])
gen = gen + 1
local ou = now + tonumber(ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], F.state, C.open, F.generation, gen, F.open_until, ou)
announce(ARGV[3], ARGV[4], C.open, gen)
return {gen, ou}
