-- acked.lua: the end of apply_acked.lua and succeed_acked.lua, after
-- the record's write: asynq's done of the delivery, the release of its
-- run's tenant count and, asked for, the queue's next run. It runs on the
-- scripts' locals r (the write's reply), n (#KEYS without dequeue.lua's)
-- and fetch (the next run is asked for).
-- KEYS, ARGV: the scripts' (KEYS[1..5] and ARGV[1..3] asynq's done's,
-- KEYS[n-3..n] the release keys; with fetch, KEYS[n+1..n+9] and
-- ARGV[4..9] dequeue.lua's).
-- Returns r; with fetch {"next", r, the next run's message or false, its
-- task ID or false}; or asynq's done's error (NOT FOUND).
local counted = agentq_counted(KEYS[3])
local done = asynq_done(KEYS, ARGV)
if type(done) == "table" and done.err then return done end
agentq_release_wake(counted, KEYS[n - 3], KEYS[n - 2], KEYS[n - 1], KEYS[n])
if not fetch then return r end
local msg, id = agentq_dequeue({KEYS[n + 1], KEYS[n + 2], KEYS[n + 3], KEYS[n + 4], KEYS[n + 5], KEYS[n + 6], KEYS[n + 7],
  KEYS[n + 8], KEYS[n + 9]}, {ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]})
return {"next", r, msg or false, id or false}
