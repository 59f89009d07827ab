-- retry.lua: asynq's retry (asynq/retry.lua) and the release of the run's
-- tenant count, in one script run in its place. The run's lane stays in
-- its task hash, for its forward. Built after lib/wake.lua,
-- lib/release.lua and asynq/retry.lua.
-- KEYS[1..8] asynq's (task hash, active, lease, retry set, the counters),
-- KEYS[9..12] ReleaseKeys (in flight, capped, ready, wake list)
-- ARGV asynq's six
-- Returns asynq's reply: OK, or the error NOT FOUND.
return agentq_released(asynq_retry, KEYS[1], true)
