-- admit admits a call against every limit of a key at once. Needs the
-- prelude.
--
-- KEYS[1] state hash, KEYS[2] starts log (zset seq -> start ms), KEYS[3]
-- leases (zset token -> expiry ms), KEYS[4] token debits (zset
-- "seq:tokens" -> ms).
-- ARGV[1] now ms or "" (Redis TIME), ARGV[2] requests (0: none), ARGV[3]
-- request window ms (per + guard), ARGV[4] tokens (0: none), ARGV[5] per
-- ms, ARGV[6] concurrency (0: none), ARGV[7] lease ms, ARGV[8] lease
-- token.
-- Returns {allowed 0|1, limit ("" when allowed), retry_in ms (0:
-- unknown), paused_until ms (0: none), start log member ("" when none)}.
--
-- Checks, in order: the pause, concurrency (expired leases are dropped
-- when the count reaches the limit), requests (the sliding log: a call
-- may start when fewer than `requests` starts lie within the window; else
-- retry when the requests-th most recent one leaves it; starts that left
-- the window are dropped when the count reaches the limit, so the log
-- holds at most `requests` entries plus those of the last window), tokens
-- (the window's debits ≥ tokens refuses; retry when enough old debits
-- leave it). An admitted call is logged (a start, a lease) in the same
-- step, so no two admissions can see the same free slot.
local now = now_ms(ARGV[1])
local req, win = tonumber(ARGV[2]), tonumber(ARGV[3])
local tok, per = tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local paused = tonumber(redis.call('HGET', KEYS[1], F.paused_until)) or 0
if paused > now then
  redis.call('HINCRBY', KEYS[1], F.deferrals_paused, 1)
  return {0, K.paused, paused - now, paused, ''}
end
if conc > 0 and redis.call('ZCARD', KEYS[3]) >= conc then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= conc then
    redis.call('HINCRBY', KEYS[1], F.deferrals_concurrency, 1)
    return {0, K.concurrency, 0, 0, ''}
  end
end
local n = 0
if req > 0 and win > 0 then
  n = redis.call('ZCARD', KEYS[2])
  if n >= req then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - win)
    n = redis.call('ZCARD', KEYS[2])
  end
  if n >= req then
    local e = redis.call('ZRANGE', KEYS[2], n - req, n - req, 'WITHSCORES')
    redis.call('HINCRBY', KEYS[1], F.deferrals_requests, 1)
    return {0, K.requests, math.max(1, tonumber(e[2]) + win - now), 0, ''}
  end
end
if tok > 0 and per > 0 then
  local used = prune_tokens(KEYS[1], KEYS[4], now, per)
  if used >= tok then
    local retry = per
    local left = used
    local old = redis.call('ZRANGE', KEYS[4], 0, 99, 'WITHSCORES')
    for i = 1, #old, 2 do
      left = left - debit_of(old[i])
      retry = tonumber(old[i + 1]) + per - now
      if left < tok then break end
    end
    redis.call('HINCRBY', KEYS[1], F.deferrals_tokens, 1)
    return {0, K.tokens, math.max(1, retry), 0, ''}
  end
end
local start = ''
if req > 0 and win > 0 then
  start = tostring(redis.call('HINCRBY', KEYS[1], F.seq, 1))
  redis.call('ZADD', KEYS[2], now, start)
  redis.call('PEXPIRE', KEYS[2], win)
end
if conc > 0 then
  redis.call('ZADD', KEYS[3], now + lease, ARGV[8])
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[3], tonumber(last[2]))
end
return {1, '', 0, 0, start}
