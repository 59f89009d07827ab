-- record reports the outcome of an admitted call. Needs the prelude and
-- window.lua.
--
-- KEYS[1] breaker hash, KEYS[2] trial leases, KEYS[3] rate mode's window
-- (window.lua's, and F.hot_at; TTL 2×window), KEYS[4] rate mode's failing tasks (zset task ID -> last
-- failure ms, trimmed to the window and to max(min failing tasks, 10)
-- members; TTL 2×window).
-- ARGV[1] now ms or "", ARGV[2] failure threshold, ARGV[3] cooldown ms,
-- ARGV[4] outcome C.success | C.failure (counted) | C.ignore,
-- ARGV[5] admission generation, ARGV[6] admission token ("" if not a
-- trial), ARGV[7] event channel, ARGV[8] breaker key, ARGV[9] mode
-- C.rate | C.consecutive, ARGV[10] window ms, ARGV[11] failure rate,
-- ARGV[12] min calls, ARGV[13] min failing tasks, ARGV[14] max cooldown
-- ms, ARGV[15] the call's task ID ("" if none).
-- Returns {state, generation, code, open_until ms (0 if none),
-- consecutive_failures, window calls, window failures, failing tasks
-- (the last three are summed after a failure only; 0 after a success)};
-- code 0 applied, 1 stale generation, 2 trial lease expired or dropped. A
-- stale success or failure still bumps success_count/failure_count and
-- last_success_at/last_failure_at (but not the window); an ignored
-- outcome never counts.
--
-- Opening stores the cooldown it used (field cooldown); a failed
-- half-open trial reopens for twice that, capped at the max cooldown;
-- closing drops it, with the window and the failing tasks. A rate-mode
-- failure that does not open announces kind "hot" with window_ms (at most
-- once per quarter window: field hot_at of the window hash): the window
-- holds a failure, so every process writes its successes at once rather
-- than batching them for a window from then (Record). Cost: O(1) — at
-- most 10 buckets and max(min failing tasks, 10) zset members.
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
local out, agen, token = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local rate, wms = ARGV[9] == C.rate, tonumber(ARGV[10])
local base, maxcd = tonumber(ARGV[3]), tonumber(ARGV[14])
local code = 0
local calls, fails, ntasks = 0, 0, 0
local function ret()
  if state ~= C.open then ou = 0 end
  return {state, gen, code, ou, cf, calls, fails, ntasks}
end
local function open_for(cd)
  state = C.open
  gen = gen + 1
  ou = now + cd
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], F.state, state, F.generation, gen, F.consecutive_failures, cf, F.open_until, ou, F.cooldown, cd)
  announce(ARGV[7], ARGV[8], state, gen, cf)
end
local function bump(kind, total)
  local b = window_add(KEYS[3], wms, now, kind, 1)
  if not total then return end
  local h = redis.call('HGETALL', KEYS[3])
  local m = {}
  for j = 1, #h, 2 do m[h[j]] = tonumber(h[j + 1]) end
  calls, fails = window_sum(m, b)
end
if agen ~= gen then
  code = 1
elseif token ~= '' then
  local sc = redis.call('ZSCORE', KEYS[2], token)
  if (not sc) or tonumber(sc) <= now then code = 2 end
elseif state ~= C.closed then
  code = 1
end
if out == C.ignore then
  if code == 0 and token ~= '' then
    gen = gen + 1
    redis.call('DEL', KEYS[2])
    redis.call('HSET', KEYS[1], F.generation, gen)
    announce(ARGV[7], ARGV[8], state, gen)
  end
  return ret()
end
if out == C.failure then
  redis.call('HINCRBY', KEYS[1], F.failure_count, 1)
  redis.call('HSET', KEYS[1], F.last_failure_at, now)
else
  redis.call('HINCRBY', KEYS[1], F.success_count, 1)
  redis.call('HSET', KEYS[1], F.last_success_at, now)
end
if code ~= 0 then return ret() end
if out == C.failure then
  if state == C.half_open then
    cf = cf + 1
    local prev = tonumber(redis.call('HGET', KEYS[1], F.cooldown)) or base
    if prev < base then prev = base end
    open_for(math.min(prev * 2, maxcd))
  elseif rate then
    bump('f', true)
    if ARGV[15] ~= '' then redis.call('ZADD', KEYS[4], now, ARGV[15]) end
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - wms)
    ntasks = redis.call('ZCARD', KEYS[4])
    local cap = math.max(tonumber(ARGV[13]), 10)
    if ntasks > cap then
      redis.call('ZREMRANGEBYRANK', KEYS[4], 0, ntasks - cap - 1)
      ntasks = cap
    end
    redis.call('PEXPIRE', KEYS[4], wms * 2)
    if calls >= tonumber(ARGV[12]) and fails >= tonumber(ARGV[11]) * calls and ntasks >= tonumber(ARGV[13]) then
      open_for(base)
    elseif now - (tonumber(redis.call('HGET', KEYS[3], F.hot_at)) or 0) >= wms / 4 then
      redis.call('HSET', KEYS[3], F.hot_at, now)
      redis.call('PUBLISH', ARGV[7], cjson.encode({key = ARGV[8], state = state, generation = gen, consecutive_failures = cf, kind = 'hot', window_ms = wms}))
    end
  else
    cf = cf + 1
    if cf >= tonumber(ARGV[2]) then
      open_for(base)
    else
      redis.call('HSET', KEYS[1], F.consecutive_failures, cf)
      announce(ARGV[7], ARGV[8], state, gen, cf, 'count')
    end
  end
elseif state == C.half_open then
  state = C.closed
  gen = gen + 1
  cf = 0
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], F.state, state, F.generation, gen, F.consecutive_failures, 0)
  redis.call('HDEL', KEYS[1], F.open_until, F.cooldown)
  announce(ARGV[7], ARGV[8], state, gen, 0)
elseif rate then
  bump('s', false)
elseif cf ~= 0 then
  cf = 0
  redis.call('HSET', KEYS[1], F.consecutive_failures, 0)
  announce(ARGV[7], ARGV[8], state, gen, 0, 'count')
end
return ret()
