-- delete removes an entry and its index memberships, provided its agent
-- and class are the ones the caller declared (and, when ARGV[4] is not
-- empty, its body is exactly ARGV[4]; and, when ARGV[5] is not empty, no
-- other requeue holds its requeue claim KEYS[7]: a requeue's removal).
-- Needs ref.lua.
--
-- KEYS[1] entries hash, KEYS[2] main index, KEYS[3] set of index keys,
-- KEYS[4] agent index, KEYS[5] class index (the caller's guess),
-- KEYS[6] refs hash, KEYS[7] the entry's requeue claim.
-- ARGV[1] id, ARGV[2] expected agent, ARGV[3] expected class,
-- ARGV[4] expected body or "" for any, ARGV[5] the caller's claim token
-- or "" (no claim: a plain delete).
-- Returns {1} deleted, {0} no such entry, {-2} the body is not ARGV[4],
-- {-3} another requeue holds the claim, {-1, agent, class} the guess was
-- wrong (nothing deleted in these three). With a claim token, the claim
-- is released with {1}, {0} and {-2}.
if ARGV[5] ~= '' then
  local claim = redis.call('GET', KEYS[7])
  if claim and claim ~= ARGV[5] then return {-3} end
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or (ARGV[4] ~= '' and cur ~= ARGV[4]) then
  if ARGV[5] ~= '' then redis.call('DEL', KEYS[7]) end
  if not cur then return {0} end
  return {-2}
end
local a, c = ref(redis.call('HGET', KEYS[6], ARGV[1]))
if a ~= ARGV[2] or c ~= ARGV[3] then return {-1, a, c} end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 4, 5 do
  redis.call('ZREM', KEYS[i], ARGV[1])
  if redis.call('ZCARD', KEYS[i]) == 0 then redis.call('SREM', KEYS[3], KEYS[i]) end
end
if ARGV[5] ~= '' then redis.call('DEL', KEYS[7]) end
return {1}
