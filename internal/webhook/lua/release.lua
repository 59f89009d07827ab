-- release ends a lease. The task goes back to the due set at ARGV[3] (or
-- sooner, when an event came meanwhile); a lease another worker holds is
-- left alone.
--
-- KEYS[1] due set, KEYS[2] leased set, KEYS[3] given-up set.
-- ARGV[1] task, ARGV[2] the lease's expiry (token), ARGV[3] when the
-- task's next delivery is due (ms; -1: none), ARGV[4] "1" when the task
-- has a given-up delivery (it is then in the given-up set, else not),
-- ARGV[5] now ms (its score when it enters the given-up set).
-- Returns 1.
local cur = redis.call("ZSCORE", KEYS[2], ARGV[1])
if cur and tonumber(cur) == tonumber(ARGV[2]) then redis.call("ZREM", KEYS[2], ARGV[1]) end
if tonumber(ARGV[3]) >= 0 then redis.call("ZADD", KEYS[1], "LT", ARGV[3], ARGV[1]) end
if ARGV[4] == "1" then
  if not redis.call("ZSCORE", KEYS[3], ARGV[1]) then redis.call("ZADD", KEYS[3], ARGV[5], ARGV[1]) end
else
  redis.call("ZREM", KEYS[3], ARGV[1])
end
return 1
