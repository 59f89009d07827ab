-- put stores an entry's body and indexes it. When the ID is already
-- stored, the entry is moved out of its old agent and class indexes
-- first, provided they are the ones the caller declared (else nothing is
-- written and the actual ones are returned, for a retry). Needs ref.lua.
--
-- KEYS[1] entries hash, KEYS[2] main index, KEYS[3] set of index keys,
-- KEYS[4] new agent index, KEYS[5] new class index,
-- KEYS[6] old agent index, KEYS[7] old class index (the caller's guess),
-- KEYS[8] refs hash.
-- ARGV[1] id, ARGV[2] new body, ARGV[3] score (dead_lettered_at ms),
-- ARGV[4] C.absent (expect no entry) or C.present (expect one whose
-- agent and class are ARGV[5] and ARGV[6]), ARGV[7] the new ref
-- (refString).
-- Returns {1} created, {0} replaced, or, when the expectation was wrong
-- and nothing was written, {-1} (no entry) or {-1, agent, class} (the
-- stored entry's agent and class).
local cur = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
if ARGV[4] == C.absent then
  if cur then
    local a, c = ref(redis.call('HGET', KEYS[8], ARGV[1]))
    return {-1, a, c}
  end
else
  if not cur then return {-1} end
  local a, c = ref(redis.call('HGET', KEYS[8], ARGV[1]))
  if a ~= ARGV[5] or c ~= ARGV[6] then return {-1, a, c} end
  for i = 6, 7 do
    redis.call('ZREM', KEYS[i], ARGV[1])
    if redis.call('ZCARD', KEYS[i]) == 0 then redis.call('SREM', KEYS[3], KEYS[i]) end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[8], ARGV[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
for i = 4, 5 do
  redis.call('ZADD', KEYS[i], ARGV[3], ARGV[1])
  redis.call('SADD', KEYS[3], KEYS[i])
end
if cur then return {0} end
return {1}
