-- allow admits a call. Needs the prelude.
--
-- KEYS[1] breaker hash, KEYS[2] trial leases (zset token -> expiry ms).
-- ARGV[1] now ms or "" (Redis TIME), ARGV[2] half-open max calls,
-- ARGV[3] trial lease ms, ARGV[4] trial token to use if a trial is
-- admitted, ARGV[5] event channel, ARGV[6] breaker key (for events),
-- ARGV[7] "1" to admit trials only (a health probe: CLOSED is denied,
-- retry_at 0).
-- Returns {allowed 0|1, state, generation, token, retry_at ms (0 if
-- none), consecutive_failures, retry_in ms (retry_at - now by the
-- script's clock, 0 if none)}.
--
-- A missing hash is CLOSED with generation 0 and is not written:
-- admissions in CLOSED are read-only. OPEN past open_until becomes
-- HALF_OPEN (generation+1); in HALF_OPEN an expired lease ends the episode
-- (generation+1, leases dropped) before slots are counted. A token that
-- already holds a live lease is the same call sent again (go-redis
-- resends a command whose reply it lost, e.g. to a read timeout): it gets
-- its trial back, lease unchanged, instead of a denial that would leave
-- its slot leased to nobody until the lease expires.
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
if state == C.closed then
  if ARGV[7] == '1' then return {0, state, gen, '', 0, cf, 0} end
  return {1, state, gen, '', 0, cf, 0}
end
if state == C.open then
  if now < ou then return {0, state, gen, '', ou, cf, ou - now} end
  state = C.half_open
  gen = gen + 1
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], F.state, state, F.generation, gen)
  announce(ARGV[5], ARGV[6], state, gen)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1)
if #expired > 0 then
  gen = gen + 1
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], F.generation, gen)
  announce(ARGV[5], ARGV[6], state, gen)
end
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then
  return {1, state, gen, ARGV[4], 0, cf, 0}
end
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
  return {1, state, gen, ARGV[4], 0, cf, 0}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {0, state, gen, '', tonumber(first[2]), cf, tonumber(first[2]) - now}
