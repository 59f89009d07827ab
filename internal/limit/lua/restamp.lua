-- restamp moves a call's start in the request log to now. Needs the
-- prelude.
--
-- KEYS[2] starts log (KEYS as admit.lua's).
-- ARGV[1] now ms or "", ARGV[2] the start member, ARGV[3] request window
-- ms.
-- Returns 1 when moved, 0 when the entry is gone or already out of its
-- window (then it no longer counts, and moving it would add a start no
-- admission allowed).
--
-- Moving a start later is always safe: its admission counted it in every
-- window that holds the admission time, and every window that holds now
-- counts it already (a later admission saw it within its window).
local now = now_ms(ARGV[1])
local at = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not at or tonumber(at) >= now or now - tonumber(at) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return 1
