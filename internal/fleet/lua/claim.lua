-- claim takes or keeps a fleet lease: the key names the job, its value
-- the holder. When the key holds this holder, its lease is extended; when
-- the key is free, this holder takes it (SET PX); else another holder has
-- it and the reply says for how long still.
--
-- KEYS[1] the lease's key.
-- ARGV[1] the holder, ARGV[2] the lease in ms.
-- Returns {1, lease ms} when this holder holds the lease now (kept or
-- taken), {0, pttl} when another does (pttl: its lease's remaining ms, as
-- PTTL replies: -1 when the key has no expiry).
local cur = redis.call("GET", KEYS[1])
if cur == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return {1, tonumber(ARGV[2])}
end
if not cur then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return {1, tonumber(ARGV[2])}
end
return {0, redis.call("PTTL", KEYS[1])}
