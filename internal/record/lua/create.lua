-- rec_create(rec, hist, a): records a newly enqueued task (Store.Create and
-- the enqueue script), with its arguments from ARGV[a] on: a id, a+1 agent,
-- a+2 action, a+3 queue, a+4 enqueued_at, a+5 correlation id, a+6 state,
-- a+7 the first event's JSON, a+8 lifetime (s), then optional field/value
-- pairs to the end of ARGV (deadline, notify). A new record is one HSET
-- (without its ID, which its key holds, and without an empty action or
-- correlation ID: a missing field reads as "") and its event gets seq 1;
-- under a record a worker wrote first (a Cluster's enqueue writes the
-- queue before the record) the fields are set one by one where missing
-- (HSETNX) and the event gets the next seq.
-- Its event (queued or scheduled: what the producer itself did) is not put
-- in the webhook outbox: webhooks are told of what happens after.
-- Returns R.applied when the record was created, R.exists when it existed.
local function rec_create(rec, hist, a)
  local existed = redis.call("EXISTS", rec)
  if existed == 0 then
    local set = {F.agent, ARGV[a + 1], F.queue, ARGV[a + 3], F.enqueued_at, ARGV[a + 4], F.state, ARGV[a + 6],
      F.run, "0", F.seq, "1"}
    if ARGV[a + 2] ~= "" then set[#set + 1] = F.action; set[#set + 1] = ARGV[a + 2] end
    if ARGV[a + 5] ~= "" then set[#set + 1] = F.correlation_id; set[#set + 1] = ARGV[a + 5] end
    for i = a + 9, #ARGV do set[#set + 1] = ARGV[i] end
    redis.call("HSET", rec, unpack(set))
    rec_event(rec, hist, ARGV[a + 7], 1, "0", false, nil)
  else
    local names = {F.id, F.agent, F.action, F.queue, F.enqueued_at, F.correlation_id, F.state}
    for i, f in ipairs(names) do redis.call("HSETNX", rec, f, ARGV[a + i - 1]) end
    redis.call("HSETNX", rec, F.run, "0")
    for i = a + 9, #ARGV, 2 do redis.call("HSETNX", rec, ARGV[i], ARGV[i + 1]) end
    rec_event(rec, hist, ARGV[a + 7], redis.call("HINCRBY", rec, F.seq, 1), "0", redis.call("HEXISTS", rec, F.watch) == 1, nil)
  end
  redis.call("EXPIRE", rec, ARGV[a + 8])
  redis.call("EXPIRE", hist, ARGV[a + 8])
  if existed == 0 then return R.applied end
  return R.exists
end
