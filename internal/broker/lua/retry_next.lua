-- retry_next.lua: retry.lua and, in the same script, the queue's next run
-- handed out (complete-and-fetch-next, prefetch.go), as done_next.lua does
-- for a done. Built after lib/wake.lua, lib/release.lua, asynq/retry.lua
-- and lib/dequeue.lua.
-- KEYS[1..8] asynq's retry keys (task hash, active, lease, retry set, the
-- counters), KEYS[9..12] ReleaseKeys (in flight, capped, ready, wake
-- list), KEYS[13..21] dequeue.lua's nine (DequeueKeys after asynq's four)
-- ARGV[1..6] asynq's six, ARGV[7..12] dequeue.lua's six
-- Returns asynq's retry error (NOT FOUND: the delivery was no longer
-- active; nothing is handed out then), else {message, task ID} of the next
-- run, or nil when the queue has none to hand out.
local counted = agentq_counted(KEYS[1])
local r = asynq_retry(KEYS, ARGV)
if type(r) == "table" and r.err then return r end
if counted then redis.call("HDEL", KEYS[1], F.counted) end
agentq_release_wake(counted, KEYS[9], KEYS[10], KEYS[11], KEYS[12])
local msg, id = agentq_dequeue({KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18], KEYS[19], KEYS[20], KEYS[21]},
  {ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12]})
if not msg then return nil end
return {msg, id}
