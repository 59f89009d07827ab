-- pause pauses a key fleet-wide, only ever extending a pause. Needs the
-- prelude.
--
-- KEYS[1] state hash (KEYS as admit.lua's).
-- ARGV[1] now ms or "", ARGV[2] pause ms, ARGV[3] reason.
-- Returns {paused_until ms in effect, 1 if this call extended it}.
local now = now_ms(ARGV[1])
local want = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], F.paused_until)) or 0
if want <= cur then return {cur, 0} end
redis.call('HSET', KEYS[1], F.paused_until, want, F.paused_reason, ARGV[3])
return {want, 1}
