-- done_next.lua: done.lua and, in the same script, the queue's next run
-- handed out (complete-and-fetch-next: the worker's processor takes it
-- without asking Redis, prefetch.go). Built after lib/wake.lua,
-- lib/release.lua, asynq/done.lua and lib/dequeue.lua.
-- KEYS[1..5] asynq's done keys (active, lease, task hash, processed
-- counters), KEYS[6..9] ReleaseKeys (in flight, capped, ready, wake list),
-- KEYS[10..18] dequeue.lua's nine (DequeueKeys after asynq's four)
-- ARGV[1..3] asynq's done arguments, ARGV[4..9] dequeue.lua's six
-- Returns asynq's done error (NOT FOUND: the delivery was no longer
-- active; nothing is handed out then), else {message, task ID} of the next
-- run, or nil when the queue has none to hand out.
local counted = agentq_counted(KEYS[3])
local done = asynq_done(KEYS, ARGV)
if type(done) == "table" and done.err then return done end
agentq_release_wake(counted, KEYS[6], KEYS[7], KEYS[8], KEYS[9])
local msg, id = agentq_dequeue({KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18]},
  {ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]})
if not msg then return nil end
return {msg, id}
