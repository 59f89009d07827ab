-- asynq/done.lua: asynq v0.26's doneCmd (internal/rdb/rdb.go), verbatim from
-- the line after the function's opening to the one before its end
-- (asynqSource cuts it out; TestScriptsAreAsynqs holds it to asynq's
-- source; do not edit it): the function asynq_done(KEYS, ARGV).
-- asynq's done: acknowledge a delivery that succeeded (its active and
-- lease entries and its task hash deleted, the processed counters
-- raised). done.lua runs it with the release of the run's tenant count;
-- internal/record's apply_acked with the record's write (DoneLua).
-- KEYS[1] active, KEYS[2] lease, KEYS[3] task hash, KEYS[4] today's
-- processed counter, KEYS[5] the processed total
-- ARGV[1] task ID, ARGV[2] the counter's expiry (Unix s), ARGV[3] the
-- total's wrap-around value
-- Returns OK, or the error NOT FOUND (the delivery is no longer active).
local function asynq_done(KEYS, ARGV)
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("DEL", KEYS[3]) == 0 then
  return redis.error_reply("NOT FOUND")
end
local n = redis.call("INCR", KEYS[4])
if tonumber(n) == 1 then
	redis.call("EXPIREAT", KEYS[4], ARGV[2])
end
local total = redis.call("GET", KEYS[5])
if tonumber(total) == tonumber(ARGV[3]) then
	redis.call("SET", KEYS[5], 1)
else
	redis.call("INCR", KEYS[5])
end
return redis.status_reply("OK")

end
