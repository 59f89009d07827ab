-- run.lua: put one run of a task on its queue (RunCall): agentq_run of
-- lib/run.lua, after lib/wake.lua and lib/lane.lua.
-- KEYS[1] asynq's task hash, KEYS[2] the list the run waits in (its lane;
-- the queue's pending list for the default lane) or, delayed, the
-- scheduled set, KEYS[3] the queue's wake list, KEYS[4] the fair ready
-- set, KEYS[5] the tenant registry (RunKeys)
-- ARGV[1] asynq's encoded TaskMessage, ARGV[2] asynq task ID, ARGV[3]
-- pending_since (Unix ns) or, scheduled, the due time (Unix s, the
-- score), ARGV[4] kind ("pending" or "scheduled"), ARGV[5] wake list cap,
-- ARGV[6] due channel, ARGV[7] due announcement ("" for none), ARGV[8]
-- tenant, ARGV[9] priority code ("" for the default lane) (RunArgs)
-- Returns 1 when written, 0 when the asynq task ID exists.
return agentq_run(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7],
  KEYS[4], KEYS[5], ARGV[8], ARGV[9])
