package breaker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// luaPrelude is shared by every breaker script.
//
//	now_ms(a)  - redisx.LuaNowMS.
//	announce(channel, key, state, gen, cf, kind) - PUBLISH {key,state,generation,
//	  consecutive_failures,kind}; cf and kind may be nil. kind "count" marks a
//	  change of consecutive_failures within CLOSED (no transition).
const luaPrelude = redisx.LuaNowMS + `
local function announce(channel, key, state, gen, cf, kind)
  redis.call('PUBLISH', channel, cjson.encode({key = key, state = state, generation = gen, consecutive_failures = cf, kind = kind}))
end
local function load(k)
  local h = redis.call('HMGET', k, 'state', 'generation', 'consecutive_failures', 'open_until')
  return (h[1] or 'closed'), (tonumber(h[2]) or 0), (tonumber(h[3]) or 0), (tonumber(h[4]) or 0)
end
`

// allowScript admits a call.
//
// KEYS[1] breaker hash, KEYS[2] trial leases (zset token -> expiry ms).
// ARGV[1] now ms or "" (Redis TIME), ARGV[2] half-open max calls,
// ARGV[3] trial lease ms, ARGV[4] trial token to use if a trial is admitted,
// ARGV[5] event channel, ARGV[6] breaker key (for events), ARGV[7] "1" to
// admit trials only (a health probe: CLOSED is denied, retry_at 0).
// Returns {allowed 0|1, state, generation, token, retry_at ms (0 if none),
// consecutive_failures, retry_in ms (retry_at - now by the script's clock, 0 if none)}.
//
// A missing hash is CLOSED with generation 0 and is not written: admissions
// in CLOSED are read-only. OPEN past open_until becomes HALF_OPEN
// (generation+1); in HALF_OPEN an expired lease ends the episode
// (generation+1, leases dropped) before slots are counted. A token that
// already holds a live lease is the same call sent again (go-redis resends
// a command whose reply it lost, e.g. to a read timeout): it gets its trial
// back, lease unchanged, instead of a denial that would leave its slot
// leased to nobody until the lease expires.
var allowScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
if state == 'closed' then
  if ARGV[7] == '1' then return {0, state, gen, '', 0, cf, 0} end
  return {1, state, gen, '', 0, cf, 0}
end
if state == 'open' then
  if now < ou then return {0, state, gen, '', ou, cf, ou - now} end
  state = 'half_open'
  gen = gen + 1
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'state', state, 'generation', gen)
  announce(ARGV[5], ARGV[6], state, gen)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1)
if #expired > 0 then
  gen = gen + 1
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'generation', gen)
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
`)

// allowArgs are allowScript's arguments.
type allowArgs struct {
	key         string        // the breaker key (KEYS, and ARGV[6] for events)
	halfOpenMax int           // ARGV[2]
	trialLease  time.Duration // ARGV[3]
	token       string        // ARGV[4]: the trial token if a trial is admitted
	trialOnly   bool          // ARGV[7]: admit trials only (a health probe)
}

// admissionReply is the reply of allowScript and allowTaskScript.
type admissionReply struct {
	allowed   bool
	state     State
	gen       int64
	token     string
	retryAtMS int64 // 0: none
	cf        int
	retryInMS int64 // 0: none
}

func parseAdmission(res any) (admissionReply, error) {
	r, err := redisx.ParseReply(res, 7)
	if err != nil {
		return admissionReply{}, err
	}
	return admissionReply{allowed: r.Int(0) == 1, state: State(r.Str(1)), gen: r.Int(2), token: r.Str(3),
		retryAtMS: r.Int(4), cf: int(r.Int(5)), retryInMS: r.Int(6)}, nil
}

// allow runs allowScript.
func (b *Breakers) allow(ctx context.Context, a allowArgs) (admissionReply, error) {
	only := "0"
	if a.trialOnly {
		only = "1"
	}
	res, err := b.run(ctx, allowScript, a.key, []string{rkeys.Breaker(a.key), rkeys.BreakerTrials(a.key)},
		b.nowArg(), a.halfOpenMax, a.trialLease.Milliseconds(), a.token, rkeys.BreakerChannel(), a.key, only)
	if err != nil {
		return admissionReply{}, err
	}
	return parseAdmission(res)
}

// recordScript reports the outcome of an admitted call.
//
// KEYS[1] breaker hash, KEYS[2] trial leases, KEYS[3] rate mode's window
// (hash of 10 ring buckets: b<i> bucket number, s<i> successes, f<i>
// failures; width (bucket ms, for snapshots) and hot_at; TTL 2×window), KEYS[4] rate mode's failing tasks (zset task ID
// -> last failure ms, trimmed to the window and to max(min failing
// tasks, 10) members; TTL 2×window).
// ARGV[1] now ms or "", ARGV[2] failure threshold, ARGV[3] cooldown ms,
// ARGV[4] outcome "s" success | "f" counted failure | "i" ignore,
// ARGV[5] admission generation, ARGV[6] admission token ("" if not a trial),
// ARGV[7] event channel, ARGV[8] breaker key, ARGV[9] mode "r" rate |
// "c" consecutive, ARGV[10] window ms, ARGV[11] failure rate,
// ARGV[12] min calls, ARGV[13] min failing tasks, ARGV[14] max cooldown ms,
// ARGV[15] the call's task ID ("" if none).
// Returns {state, generation, code, open_until ms (0 if none),
// consecutive_failures, window calls, window failures, failing tasks
// (the last three are summed after a failure only; 0 after a success)};
// code 0 applied, 1 stale generation, 2 trial lease expired or dropped. A
// stale "s"/"f" still bumps success_count/failure_count and
// last_success_at/last_failure_at (but not the window); "i" never counts.
//
// Opening stores the cooldown it used (field cooldown); a failed half-open
// trial reopens for twice that, capped at the max cooldown; closing drops
// it, with the window and the failing tasks. A rate-mode failure that does
// not open announces kind "hot" with window_ms (at most once per quarter
// window: field hot_at of the window hash): the window holds a failure, so
// every process writes its successes at once rather than batching them
// for a window from then (Record). Cost: O(1) — at most 10
// buckets and max(min failing tasks, 10) zset members.
var recordScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
local out, agen, token = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local rate, wms = ARGV[9] == 'r', tonumber(ARGV[10])
local base, maxcd = tonumber(ARGV[3]), tonumber(ARGV[14])
local code = 0
local calls, fails, ntasks = 0, 0, 0
local function ret()
  if state ~= 'open' then ou = 0 end
  return {state, gen, code, ou, cf, calls, fails, ntasks}
end
local function open_for(cd)
  state = 'open'
  gen = gen + 1
  ou = now + cd
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], 'state', state, 'generation', gen, 'consecutive_failures', cf, 'open_until', ou, 'cooldown', cd)
  announce(ARGV[7], ARGV[8], state, gen, cf)
end
local function bump(kind, total)
  local w = math.max(math.floor(wms / 10), 1)
  local b = math.floor(now / w)
  local i = b % 10
  if tonumber(redis.call('HGET', KEYS[3], 'b' .. i)) ~= b then
    redis.call('HSET', KEYS[3], 'b' .. i, b, 's' .. i, 0, 'f' .. i, 0, 'width', w)
  end
  redis.call('HINCRBY', KEYS[3], kind .. i, 1)
  redis.call('PEXPIRE', KEYS[3], wms * 2)
  if not total then return end
  local h = redis.call('HGETALL', KEYS[3])
  local m = {}
  for j = 1, #h, 2 do m[h[j]] = tonumber(h[j + 1]) end
  for j = 0, 9 do
    local bj = m['b' .. j]
    if bj and bj > b - 10 then
      calls = calls + (m['s' .. j] or 0) + (m['f' .. j] or 0)
      fails = fails + (m['f' .. j] or 0)
    end
  end
end
if agen ~= gen then
  code = 1
elseif token ~= '' then
  local sc = redis.call('ZSCORE', KEYS[2], token)
  if (not sc) or tonumber(sc) <= now then code = 2 end
elseif state ~= 'closed' then
  code = 1
end
if out == 'i' then
  if code == 0 and token ~= '' then
    gen = gen + 1
    redis.call('DEL', KEYS[2])
    redis.call('HSET', KEYS[1], 'generation', gen)
    announce(ARGV[7], ARGV[8], state, gen)
  end
  return ret()
end
if out == 'f' then
  redis.call('HINCRBY', KEYS[1], 'failure_count', 1)
  redis.call('HSET', KEYS[1], 'last_failure_at', now)
else
  redis.call('HINCRBY', KEYS[1], 'success_count', 1)
  redis.call('HSET', KEYS[1], 'last_success_at', now)
end
if code ~= 0 then return ret() end
if out == 'f' then
  if state == 'half_open' then
    cf = cf + 1
    local prev = tonumber(redis.call('HGET', KEYS[1], 'cooldown')) or base
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
    elseif now - (tonumber(redis.call('HGET', KEYS[3], 'hot_at')) or 0) >= wms / 4 then
      redis.call('HSET', KEYS[3], 'hot_at', now)
      redis.call('PUBLISH', ARGV[7], cjson.encode({key = ARGV[8], state = state, generation = gen, consecutive_failures = cf, kind = 'hot', window_ms = wms}))
    end
  else
    cf = cf + 1
    if cf >= tonumber(ARGV[2]) then
      open_for(base)
    else
      redis.call('HSET', KEYS[1], 'consecutive_failures', cf)
      announce(ARGV[7], ARGV[8], state, gen, cf, 'count')
    end
  end
elseif state == 'half_open' then
  state = 'closed'
  gen = gen + 1
  cf = 0
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], 'state', state, 'generation', gen, 'consecutive_failures', 0)
  redis.call('HDEL', KEYS[1], 'open_until', 'cooldown')
  announce(ARGV[7], ARGV[8], state, gen, 0)
elseif rate then
  bump('s', false)
elseif cf ~= 0 then
  cf = 0
  redis.call('HSET', KEYS[1], 'consecutive_failures', 0)
  announce(ARGV[7], ARGV[8], state, gen, 0, 'count')
end
return ret()
`)

// recordArgs are recordScript's arguments.
type recordArgs struct {
	key     string // the breaker key (KEYS, and ARGV[8] for events)
	cfg     Config // ARGV[2], [3], [9]–[14] (withDefaults applied)
	outcome string // ARGV[4]: "s", "f" or "i"
	gen     int64  // ARGV[5]: the admission's generation
	token   string // ARGV[6]: the admission's trial token, "" if none
	task    string // ARGV[15]: the call's task ID, "" if none
}

// Codes of recordReply.code.
const (
	recordApplied   = 0
	recordStaleGen  = 1
	recordLeaseGone = 2
)

// recordReply is recordScript's reply.
type recordReply struct {
	state       State
	gen         int64
	code        int64 // recordApplied, recordStaleGen or recordLeaseGone
	openUntilMS int64 // 0: not open
	cf          int
	// Rate mode, when the outcome was counted in the window: the window's
	// calls and failures, and the distinct failing tasks (after a failure).
	calls, fails, failingTasks int64
}

// breakerKeys are the keys of every script that may touch rate mode's state.
func breakerKeys(key string) []string {
	return []string{rkeys.Breaker(key), rkeys.BreakerTrials(key), rkeys.BreakerWindow(key), rkeys.BreakerFailing(key)}
}

// record runs recordScript.
func (b *Breakers) record(ctx context.Context, a recordArgs) (recordReply, error) {
	c := a.cfg
	mode := "c"
	if c.Mode == ModeRate {
		mode = "r"
	}
	res, err := b.run(ctx, recordScript, a.key, breakerKeys(a.key),
		b.nowArg(), c.FailureThreshold, c.Cooldown.Milliseconds(), a.outcome, a.gen, a.token, rkeys.BreakerChannel(), a.key,
		mode, c.Window.Milliseconds(), strconv.FormatFloat(c.FailureRate, 'g', -1, 64), c.MinCalls, c.MinFailingTasks,
		c.MaxCooldown.Milliseconds(), a.task)
	if err != nil {
		return recordReply{}, err
	}
	r, err := redisx.ParseReply(res, 8)
	if err != nil {
		return recordReply{}, err
	}
	return recordReply{state: State(r.Str(0)), gen: r.Int(1), code: r.Int(2), openUntilMS: r.Int(3), cf: int(r.Int(4)),
		calls: r.Int(5), fails: r.Int(6), failingTasks: r.Int(7)}, nil
}

// tripScript opens the breaker until now+d (manual override).
//
// KEYS[1] breaker hash, KEYS[2] trial leases. ARGV[1] now ms or "",
// ARGV[2] d in ms, ARGV[3] event channel, ARGV[4] breaker key.
// Returns {generation, open_until ms}.
var tripScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local state, gen = load(KEYS[1])
gen = gen + 1
local ou = now + tonumber(ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'state', 'open', 'generation', gen, 'open_until', ou)
announce(ARGV[3], ARGV[4], 'open', gen)
return {gen, ou}
`)

// trip runs tripScript: the breaker's new generation and open_until (ms).
func (b *Breakers) trip(ctx context.Context, key string, d time.Duration) (gen, openUntilMS int64, err error) {
	res, err := b.run(ctx, tripScript, key, []string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		b.nowArg(), d.Milliseconds(), rkeys.BreakerChannel(), key)
	if err != nil {
		return 0, 0, err
	}
	r, err := redisx.ParseReply(res, 2)
	if err != nil {
		return 0, 0, err
	}
	return r.Int(0), r.Int(1), nil
}

// resetScript closes the breaker.
//
// KEYS[1] breaker hash, KEYS[2] trial leases, KEYS[3] rate window,
// KEYS[4] failing tasks. ARGV[1] event channel, ARGV[2] breaker key.
// Returns the new generation. The window, the failing tasks and the grown
// cooldown go too.
var resetScript = redis.NewScript(luaPrelude + `
local state, gen = load(KEYS[1])
gen = gen + 1
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'state', 'closed', 'generation', gen, 'consecutive_failures', 0)
redis.call('HDEL', KEYS[1], 'open_until', 'cooldown')
announce(ARGV[1], ARGV[2], 'closed', gen, 0)
return gen
`)

// reset runs resetScript: the breaker's new generation.
func (b *Breakers) reset(ctx context.Context, key string) (int64, error) {
	res, err := b.run(ctx, resetScript, key, breakerKeys(key),
		rkeys.BreakerChannel(), key)
	if err != nil {
		return 0, err
	}
	gen, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("unexpected script reply %T", res)
	}
	return gen, nil
}

// flushScript adds batched successes.
//
// KEYS[1] breaker hash, KEYS[2] rate mode's window. ARGV[1] now ms or "",
// ARGV[2] number of successes, ARGV[3] the window ms (0: consecutive
// mode). Returns the new success_count. In rate mode a CLOSED breaker's
// window counts them too, in the current bucket.
var flushScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local n, wms = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'last_success_at', now)
if wms > 0 and (redis.call('HGET', KEYS[1], 'state') or 'closed') == 'closed' then
  local w = math.max(math.floor(wms / 10), 1)
  local b = math.floor(now / w)
  local i = b % 10
  if tonumber(redis.call('HGET', KEYS[2], 'b' .. i)) ~= b then
    redis.call('HSET', KEYS[2], 'b' .. i, b, 's' .. i, 0, 'f' .. i, 0, 'width', w)
  end
  redis.call('HINCRBY', KEYS[2], 's' .. i, n)
  redis.call('PEXPIRE', KEYS[2], wms * 2)
end
return redis.call('HINCRBY', KEYS[1], 'success_count', n)
`)

// indexCall adds breaker key to the index of breakers (rkeys.Breakers), a
// plain SADD riding in a pipeline with the breaker's own script.
func indexCall(key string) redisx.Call {
	return redisx.Call{Cmd: []any{"sadd", rkeys.Breakers(), key}}
}

// run executes script for key in one round trip. The first time this
// process touches key, the breaker index's SADD rides in the same pipeline
// (outside the script: the index is not in the breaker's hash slot).
func (b *Breakers) run(ctx context.Context, s *redis.Script, key string, keys []string, args ...any) (any, error) {
	if _, ok := b.seen.Load(key); ok {
		return b.runner.Run(ctx, s, keys, args...)
	}
	rs := redisx.Pipelined(ctx, b.rdb, []redisx.Call{
		{Script: s, Keys: keys, Args: args},
		indexCall(key),
	})
	if rs[1].Err == nil {
		b.seen.Store(key, struct{}{})
	}
	return rs[0].Val, rs[0].Err
}
