-- done.lua: asynq's done (asynq/done.lua) and the release of the run's
-- tenant count, in one script run in its place (when no record write rides
-- it: see Ack). Built after lib/wake.lua, lib/release.lua and
-- asynq/done.lua.
-- KEYS[1..5] asynq's (active, lease, task hash, processed counters),
-- KEYS[6..9] ReleaseKeys (in flight, capped, ready, wake list)
-- ARGV asynq's three
-- Returns asynq's reply: OK, or the error NOT FOUND.
return agentq_released(asynq_done, KEYS[3], false)
