-- remove_if_score removes an index entry only if its score (due time) is
-- still the one a repair looked at, so that a restart scheduled again
-- meanwhile keeps its slot.
--
-- KEYS[1] restart index (rkeys.RestartPending).
-- ARGV[1] task id, ARGV[2] the score seen (unix ms).
-- Returns 1 when removed, 0 otherwise.
local s = redis.call("ZSCORE", KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then
  return redis.call("ZREM", KEYS[1], ARGV[1])
end
return 0
