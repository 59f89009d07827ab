-- release gives a requeue's claim back (its enqueue failed).
--
-- KEYS[1] the entry's requeue claim.
-- ARGV[1] the caller's token.
-- Returns 1 released, 0 the claim was not the caller's (expired).
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
