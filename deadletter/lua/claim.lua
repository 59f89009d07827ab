-- claim claims dead letter ARGV[1] for one requeue: provided its body is
-- still the one the caller read (its SHA-1 is ARGV[2]) and no other
-- requeue holds its claim, the claim is set to the caller's token. The
-- entry itself is left in place until the requeue has enqueued the run
-- (delete.lua with the token removes it then), so a requeue that fails or
-- dies loses nothing.
--
-- KEYS[1] entries hash, KEYS[2] the entry's requeue claim.
-- ARGV[1] id, ARGV[2] SHA-1 (hex) of the body read, ARGV[3] token,
-- ARGV[4] claim TTL (ms).
-- Returns 1 claimed; 0 no such entry (ErrNotFound); -1 another requeue
-- holds the claim, -2 the body changed (both a *ConflictError). Only 1
-- writes anything.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if redis.sha1hex(cur) ~= ARGV[2] then return -2 end
if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then return -1 end
return 1
