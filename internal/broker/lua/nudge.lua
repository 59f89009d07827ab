-- nudge.lua: the fleet's periodic look at a queue, instead of each idle
-- worker's: when the queue has work a worker could take (asynq's pending
-- list or a ready fair lane) and is not paused, but its wake list holds no
-- token (one was lost, or a producer that is not agentq's wrote the task),
-- push one, so that an idle worker wakes and takes it (a woken worker
-- keeps taking tasks while it has free slots).
-- KEYS[1] asynq's pending list of the queue, KEYS[2] asynq's paused key,
-- KEYS[3] the fair ready set (rkeys.FairReady), KEYS[4] the queue's wake
-- list (rkeys.Wake); all of one slot.
-- ARGV: none.
-- Returns 1 when a token was pushed, else 0.
if redis.call("LLEN", KEYS[4]) > 0 or redis.call("EXISTS", KEYS[2]) == 1 then
  return 0
end
if redis.call("LLEN", KEYS[1]) == 0 and redis.call("ZCARD", KEYS[3]) == 0 then
  return 0
end
redis.call("LPUSH", KEYS[4], "1")
return 1
