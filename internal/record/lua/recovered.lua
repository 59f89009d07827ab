-- recovered.lua: records that a lost worker's attempt was taken back by
-- asynq's lease recovery (Store.Recovered): when the record is still
-- active on that worker (F.worker), it goes back to pending (the run waits
-- on its queue for its next delivery) and its history gains the event
-- interrupted with lost true, reason WORKER_LOST, the lost attempt
-- (F.attempts - F.attempts_base) and the worker. A record that moved on
-- (another delivery started it: F.worker names another worker; it ended,
-- waits or was canceled) is left alone.
-- KEYS[1] task record, KEYS[2] history, KEYS[3] webhook outbox, KEYS[4]
-- the webhooks' due set (absent on a Redis Cluster)
-- ARGV[1] the lost worker, ARGV[2] time (RFC3339Nano), ARGV[3] lifetime
-- (s), ARGV[4] write ID
-- Returns {R.applied, outboxed (1 when the event went in the webhook
-- outbox)}, or {R.stale} when nothing was written.
local cur = redis.call("HMGET", KEYS[1], F.state, F.worker, F.attempts, F.attempts_base, F.restarts, F.seq, F.watch,
  F.notify)
if cur[1] ~= S.active or cur[2] ~= ARGV[1] then return {R.stale} end
local seq = (tonumber(cur[6]) or 0) + 1
local ran = (tonumber(cur[3]) or 0) - (tonumber(cur[4]) or 0)
local ev = cjson.encode({at = ARGV[2], event = E.interrupted, attempt = ran, restart = tonumber(cur[5]) or 0,
  error_class = "", error = "", delay_ms = 0, worker = ARGV[1], reason = WORKER_LOST, lost = true})
redis.call("HSET", KEYS[1], F.state, S.pending, F.updated_at, ARGV[2], F.write_id, ARGV[4], F.seq, seq)
local len, outboxed = rec_event(KEYS[1], KEYS[2], ev, seq, "0", cur[7], cur[8], KEYS[3], KEYS[4])
rec_expire(KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[3]), len == 1)
return {R.applied, outboxed}
