-- acked.lua: the end of apply_acked.lua and succeed_acked.lua, after
-- the record's write: asynq's done of the delivery, the release of its
-- run's tenant count and, asked for, the queue's next run. It runs on the
-- scripts' locals r (the write's reply), n (#KEYS without dequeue.lua's)
-- and fetch (the next run is asked for).
-- KEYS, ARGV: the scripts' (KEYS[1..5] and ARGV[1..3] asynq's done's,
-- KEYS[n-3..n] the release keys; with fetch, ARGV[4..9] dequeue.lua's
-- (the worker's own dequeue's),
-- and KEYS[n+1..n+9] dequeue.lua's nine keys or, from succeed_acked.lua,
-- only the four the script has not already, KEYS[n+1..n+4]: the pending
-- list, the paused set, the tenants' settings and the default tenant's
-- pass; the active list and lease are asynq's done's KEYS[1..2], the
-- ready and capped sets and the in-flight counts the release's).
-- Returns r; with fetch, the next run's message alone (asynq's
-- TaskMessage, which holds its task ID) when r is R.applied and a run was
-- handed out (a table reply costs Redis a probe of its fields and a
-- deferred length, more than its elements), else r when r is R.applied,
-- else {"next", r, the next run's message or false, its task ID or false};
-- or asynq's done's error (NOT FOUND).
-- The run's tenant count: only a dequeue with a cap counts a run, and a
-- worker acks only runs its own dequeues handed out, all with the
-- arguments of the next run's (ARGV[4..9]: this worker's fair config). So
-- when those name no cap (ARGV[8], the default cap, "0"; ARGV[9], named
-- tenants, "0"), the run was not counted and its mark is not read.
local counted = nil
if not (fetch and ARGV[8] == "0" and ARGV[9] == "0") then counted = agentq_counted(KEYS[3]) end
local done = asynq_done(KEYS, ARGV)
if type(done) == "table" and done.err then return done end
agentq_release_wake(counted, KEYS[n - 3], KEYS[n - 2], KEYS[n - 1], KEYS[n])
if not fetch then return r end
local dq
if #KEYS == n + 9 then
  dq = {KEYS[n + 1], KEYS[n + 2], KEYS[n + 3], KEYS[n + 4], KEYS[n + 5], KEYS[n + 6], KEYS[n + 7], KEYS[n + 8], KEYS[n + 9]}
else
  dq = {KEYS[n + 1], KEYS[n + 2], KEYS[1], KEYS[2], KEYS[n - 1], KEYS[n - 2], KEYS[n - 3], KEYS[n + 3], KEYS[n + 4]}
end
local msg, id = agentq_dequeue(dq, {ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]})
if r == R.applied then return msg or r end
return {"next", r, msg or false, id or false}
