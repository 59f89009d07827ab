-- lib/wake.lua: defines agentq_wake(key, n, cap): push up to n tokens onto
-- the wake list key, never beyond cap. The scripts that make tasks pending
-- (the producers' run, the forward, the requeue) and those that release a
-- capped tenant include it, so the token travels with the write.
-- KEYS: none of its own (key is the caller's: rkeys.Wake of the queue).
-- ARGV: none of its own.
-- Returns (the function) the number of tokens pushed.
local function agentq_wake(key, n, cap)
  local room = cap - redis.call("LLEN", key)
  if n > room then n = room end
  if n <= 0 then return 0 end
  local t = {}
  for i = 1, n do t[i] = "1" end
  return redis.call("LPUSH", key, unpack(t))
end
