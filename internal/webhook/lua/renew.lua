-- renew extends a lease still held.
--
-- KEYS[1] leased set.
-- ARGV[1] task, ARGV[2] the lease's expiry (token), ARGV[3] the new
-- expiry.
-- Returns 1 when renewed, 0 when the lease was lost.
local cur = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
redis.call("ZADD", KEYS[1], ARGV[3], ARGV[1])
return 1
