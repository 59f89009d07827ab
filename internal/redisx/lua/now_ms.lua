-- now_ms.lua: the clock every script that reads one starts with
-- (redisx.LuaNowMS; Scripts.Source inserts it for redisx.NowMS). No KEYS
-- or ARGV of its own: now_ms(a) returns a's number when a is one (an
-- injected clock's milliseconds, passed in ARGV by tests), else the Redis
-- server's TIME in ms — one clock for the whole fleet.
local function now_ms(a)
  local n = tonumber(a)
  if n then return n end
  return SERVER_NOW_MS
end
