-- resume ends a key's pause now (an operator's override). Needs the
-- prelude.
--
-- KEYS[1] state hash.
-- ARGV[1] now ms or "".
-- Returns {paused_until ms of the pause that was in force (0: none), its
-- reason ("" when none)}. A pause already over is cleared too.
local now = now_ms(ARGV[1])
local h = redis.call('HMGET', KEYS[1], F.paused_until, F.paused_reason)
if not h[1] then return {0, ''} end
redis.call('HDEL', KEYS[1], F.paused_until, F.paused_reason)
local pu = tonumber(h[1]) or 0
if pu <= now then return {0, ''} end
return {pu, h[2] or ''}
