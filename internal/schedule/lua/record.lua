-- record records a tick in a schedule's state, never moving it back.
--
-- KEYS[1] the schedule's state hash (rkeys.Schedule).
-- ARGV[1] the field: F.last_fire or F.last_skipped, ARGV[2] the tick,
-- Unix ms, ARGV[3] the tick's task ID (with F.last_fire; "" otherwise),
-- ARGV[4] the hash's time to live, ms.
-- Returns 1 when recorded, 0 when the field already held this tick or a
-- later one.
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if cur >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], F.last_task, ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
