-- prelude: the functions the limit scripts share (after redisx's
-- now_ms). No KEYS or ARGV of its own.
--
-- debit_of(m) returns the tokens of a debit log member "seq:tokens".
-- prune_tokens(state, log, now, per) drops debits older than the window
-- from log, subtracts them from state's F.tokens_used, and returns the
-- tokens used within the window.
local function debit_of(m)
  return tonumber(string.match(m, ':(%d+)$')) or 0
end
local function prune_tokens(state, log, now, per)
  if redis.call('EXISTS', log) == 0 then
    redis.call('HDEL', state, F.tokens_used)
    return 0
  end
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - per)
  if #old > 0 then
    local sum = 0
    for _, m in ipairs(old) do sum = sum + debit_of(m) end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - per)
    redis.call('HINCRBY', state, F.tokens_used, -sum)
  end
  return tonumber(redis.call('HGET', state, F.tokens_used)) or 0
end
