-- watch.lua: marks a task watched (Store.Watch): from now on every event
-- its scripts record is announced on its shard channel.
-- KEYS[1] task record
-- Returns {R.applied}, or {R.missing} when there is no record (nothing
-- written).
if redis.call("EXISTS", KEYS[1]) == 0 then return {R.missing} end
redis.call("HSET", KEYS[1], F.watch, "1")
return {R.applied}
