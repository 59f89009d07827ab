-- paused_for reads the pause in force on a key. Needs the prelude.
--
-- KEYS[1] state hash (KEYS as admit.lua's).
-- ARGV[1] now ms or "".
-- Returns the ms left of the pause in force (0: none).
local now = now_ms(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], F.paused_until)) or 0
if cur > now then return cur - now end
return 0
