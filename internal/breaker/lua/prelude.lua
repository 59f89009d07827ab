-- prelude: the functions every breaker script shares (after redisx's
-- now_ms). No KEYS or ARGV of its own.
--
-- announce(channel, key, state, gen, cf, kind) PUBLISHes {key, state,
-- generation, consecutive_failures, kind} on channel; cf and kind may be
-- nil. kind "count" marks a change of consecutive_failures within CLOSED
-- (no transition).
-- load(k) returns the breaker hash k's state (C.closed when missing),
-- generation, consecutive failures and open_until (ms), numbers 0 when
-- missing.
local function announce(channel, key, state, gen, cf, kind)
  redis.call('PUBLISH', channel, cjson.encode({key = key, state = state, generation = gen, consecutive_failures = cf, kind = kind}))
end
local function load(k)
  local h = redis.call('HMGET', k, F.state, F.generation, F.consecutive_failures, F.open_until)
  return (h[1] or C.closed), (tonumber(h[2]) or 0), (tonumber(h[3]) or 0), (tonumber(h[4]) or 0)
end
