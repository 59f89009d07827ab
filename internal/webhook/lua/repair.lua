-- repair.lua: makes a task whose outbox holds entries due now unless it
-- is due or leased already (Deliverer.Repair, on a Redis Cluster).
-- KEYS[1] the due set (rkeys.WebhooksDue); KEYS[2] the leased set
-- (rkeys.WebhooksLeased)
-- ARGV[1] the task; ARGV[2] now ms
-- Returns 1 when it made the task due, else 0.
if redis.call("ZSCORE", KEYS[1], ARGV[1]) or redis.call("ZSCORE", KEYS[2], ARGV[1]) then return 0 end
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
return 1
