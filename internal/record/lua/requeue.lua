-- requeue.lua: records that a dead letter was put back on its queue as
-- run ARGV[1], after that run was enqueued (Store.Requeued), rebuilding the
-- record from the dead letter when it has expired.
-- KEYS[1] task record, KEYS[2] history, KEYS[3] webhook outbox, KEYS[4]
-- the webhooks' due set (absent on a Redis Cluster)
-- ARGV[1] the new run, ARGV[2] lifetime (s), ARGV[3] "requeued" event
-- JSON, ARGV[4] updated_at, ARGV[5] write ID, ARGV[6] number n of seed
-- pairs, ARGV[7..6+2n] field/value pairs seeded when the record is
-- missing, ARGV[7+2n..] history events (JSON) restored when the history
-- is missing (their seq numbers are kept).
-- Returns {R.applied, outboxed} when the record now shows the run as
-- pending (outboxed: 1 when the event went in the webhook outbox), {R.again} when this write ID did that already, {R.ended} when the run
-- had begun already (only the event is added; outboxed follows too), {R.stale} when the record
-- is at a later run, {R.canceled} when the task is canceled (nothing
-- written for either).
local cur = redis.call("HMGET", KEYS[1], F.state, F.run, F.write_id, F.seq, F.attempts, F.watch, F.notify)
if cur[3] == ARGV[5] then return {R.again} end
if cur[1] == S.canceled then return {R.canceled} end
local run = tonumber(ARGV[1])
if cur[2] and tonumber(cur[2]) > run then return {R.stale} end
local seq = tonumber(cur[4]) or 0
local last = 6 + 2 * tonumber(ARGV[6])
if not cur[2] or tonumber(cur[2]) < run then
  for i = 7, last, 2 do redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[i + 1]) end
  cur[5] = redis.call("HGET", KEYS[1], F.attempts)
  cur[7] = redis.call("HGET", KEYS[1], F.notify)
  if redis.call("EXISTS", KEYS[2]) == 0 then
    -- A record holding its first event (F.first) keeps it: not restored twice.
    local held = redis.call("HEXISTS", KEYS[1], F.first) == 1
    for i = last + 1, #ARGV do
      local ok, e = pcall(cjson.decode, ARGV[i])
      local s = ok and type(e) == "table" and tonumber(e.seq)
      if s and s > seq then seq = s end
      if not (held and s == 1) then hist_append(KEYS[2], ARGV[i], "0") end
    end
  end
end
seq = seq + 1
if cur[2] and tonumber(cur[2]) == run then
  redis.call("HSET", KEYS[1], F.write_id, ARGV[5], F.seq, seq)
  local _, outboxed = rec_event(KEYS[1], KEYS[2], ARGV[3], seq, "0", cur[6], cur[7], KEYS[3], KEYS[4])
  redis.call("EXPIRE", KEYS[2], ARGV[2])
  return {R.ended, outboxed}
end
redis.call("HSET", KEYS[1], F.state, S.pending, F.run, ARGV[1], F.restarts, 0, F.error_class, "", F.classified_by, "", F.error, "",
  F.updated_at, ARGV[4], F.attempts_base, cur[5] or 0, F.write_id, ARGV[5], F.seq, seq)
redis.call("HDEL", KEYS[1], F.next_attempt_at, F.reason, F.deadline)
local _, outboxed = rec_event(KEYS[1], KEYS[2], ARGV[3], seq, "0", cur[6], cur[7], KEYS[3], KEYS[4])
redis.call("EXPIRE", KEYS[1], ARGV[2])
redis.call("EXPIRE", KEYS[2], ARGV[2])
redis.call("EXPIRE", KEYS[1] .. STEPS_SUFFIX, ARGV[2]) -- the steps hash (rkeys.TaskSteps), when there is one: kept
redis.call("EXPIRE", KEYS[1] .. SIGNALS_SUFFIX, ARGV[2]) -- the signals hash (rkeys.TaskSignals), when there is one: kept
for _, sfx in ipairs(CHILDREN_SUFFIXES) do -- a children wait's keys (rkeys.TaskChildren, TaskChildSpecs, TaskChildEnds)
  redis.call("EXPIRE", KEYS[1] .. sfx, ARGV[2])
end
return {R.applied, outboxed}
