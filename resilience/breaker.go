package resilience

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rediserr"
	"github.com/agentq/agentq/internal/rkeys"
)

// The shared circuit breaker (DESIGN.md §2).
//
// One breaker per key lives in Redis as a hash (rkeys.Breaker) plus a sorted
// set of half-open trial leases (rkeys.BreakerTrials, same hash tag). Every
// admission and every transition is one Lua script over those two keys, so all
// workers of all processes see and change the same state atomically, and no
// lock is held while the agent runs: Allow returns, the caller runs the agent,
// then Record reports the outcome.
//
// Time: every elapsed-time decision (cooldown, trial lease expiry) uses the
// Redis server's TIME, read inside the script, so the clocks of the worker
// machines do not matter. Tests may inject a Clock; its value is then passed
// to the scripts instead (ARGV), which makes the state machine deterministic.
//
// Generations fence stale results: every transition bumps the generation, an
// Admission carries the generation it was given under, and a Record whose
// generation is no longer current (or whose trial lease is gone) changes no
// state. Such a Record still counts the outcome in the plain statistics
// (failure_count/success_count and last_failure_at/last_success_at): the
// backend did answer, and those counters describe the backend, not the state
// machine.
//
// Persistence: breaker keys carry no TTL and nothing but Reset, Trip and the
// state machine writes them; NewBreakers writes nothing, so a new worker
// never resets shared state. The happy path of a CLOSED breaker is read-only
// in Allow and free in Record (successes are batched and flushed by Start's
// loop).
//
// Half-open episodes: OPEN becomes HALF_OPEN lazily, inside Allow, once the
// server time reaches open_until; that starts an episode (generation+1) in
// which at most HalfOpenMaxCalls trials are admitted, cluster-wide. A trial
// success closes the breaker, a trial failure reopens it with a fresh
// cooldown. A trial that ends without a verdict — its lease expired (the
// worker died) or it was released with OutcomeIgnore (the call was canceled)
// — ends the episode too: a new episode starts (generation+1, every lease
// dropped) with a fresh set of trial slots. So "admissions per generation ≤
// HalfOpenMaxCalls" holds strictly, and a killed worker wedges the breaker for
// at most TrialLease. With HalfOpenMaxCalls > 1 the other trials of an ended
// episode become stale: their results are counted but decide nothing.

// Breaker state stored in Redis. The names are stable (JSON, CLI output).
type BreakerState string

// The three breaker states.
const (
	StateClosed   BreakerState = "closed"
	StateOpen     BreakerState = "open"
	StateHalfOpen BreakerState = "half_open"
)

// BreakerConfig tunes one breaker. It is passed on every call, so it may come
// from per-agent configuration; workers sharing a key should share a config.
type BreakerConfig struct {
	// FailureThreshold is the number of consecutive counted failures that
	// opens the breaker; zero (or negative) means 3.
	FailureThreshold int
	// Cooldown is how long the breaker stays OPEN before it admits trials;
	// zero (or negative) means 60s.
	Cooldown time.Duration
	// HalfOpenMaxCalls is the number of trials admitted cluster-wide per
	// half-open episode; zero (or negative) means 1.
	HalfOpenMaxCalls int
	// TrialLease is how long a trial may hold its slot before it expires and
	// the breaker may admit another trial; the caller passes the agent's
	// timeout plus a margin. Zero (or negative) means 60s.
	TrialLease time.Duration
}

// Defaults of BreakerConfig.
const (
	DefaultFailureThreshold = 3
	DefaultCooldown         = 60 * time.Second
	DefaultHalfOpenMaxCalls = 1
	DefaultTrialLease       = 60 * time.Second
)

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.Cooldown <= 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.HalfOpenMaxCalls <= 0 {
		c.HalfOpenMaxCalls = DefaultHalfOpenMaxCalls
	}
	if c.TrialLease <= 0 {
		c.TrialLease = DefaultTrialLease
	}
	return c
}

// Outcome is what the caller reports to Record about an admitted call.
type Outcome int

// Outcomes. The zero Outcome is invalid, so a forgotten assignment is an
// error rather than a silent success.
const (
	// OutcomeSuccess: the backend answered — a success, or a failure whose
	// class does not count against the breaker (invalid_request, …).
	OutcomeSuccess Outcome = iota + 1
	// OutcomeFailure: a counted failure (network, timeout, rate limit, …).
	OutcomeFailure
	// OutcomeIgnore: the call was canceled (shutdown): release any trial
	// lease and change nothing else.
	OutcomeIgnore
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeFailure:
		return "failure"
	case OutcomeIgnore:
		return "ignore"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

func (o Outcome) lua() (string, bool) {
	switch o {
	case OutcomeSuccess:
		return "s", true
	case OutcomeFailure:
		return "f", true
	case OutcomeIgnore:
		return "i", true
	}
	return "", false
}

// Admission is Allow's answer; pass it back unchanged to Record.
type Admission struct {
	// Allowed says whether the call may go to the backend.
	Allowed bool `json:"allowed"`
	// State is the breaker state seen at admission.
	State BreakerState `json:"state"`
	// Generation fences stale results: it bumps on every transition.
	Generation int64 `json:"generation"`
	// Token is the half-open trial lease; "" for closed-state admissions.
	Token string `json:"token,omitempty"`
	// RetryAt is, when denied, the earliest time a trial may be admitted:
	// open_until, or the earliest trial lease expiry (Redis server time).
	RetryAt time.Time `json:"retry_at,omitzero"`
	// ConsecutiveFailures is the count seen at admission.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// RetryIn is, when denied, RetryAt minus now by the breaker's clock (Redis
	// TIME): the wait to use, free of the local clock's skew.
	RetryIn time.Duration `json:"retry_in,omitzero"`
}

// Errors of the breaker.
var (
	// ErrBreakerUnavailable: Redis could not be reached (or answered that it
	// cannot serve: LOADING, READONLY, …). Allow still returns an Admission
	// decided from the last state this process saw, so the caller may choose.
	ErrBreakerUnavailable = errors.New("circuit breaker unavailable")
	// ErrStaleAdmission: Record's admission belongs to an older generation,
	// or its trial lease expired or was dropped; the outcome was counted in
	// the statistics but changed no state. Use errors.As with *StaleError for
	// the details.
	ErrStaleAdmission = errors.New("stale breaker admission")
	// ErrNotAdmitted: Record was given an Admission whose Allowed is false.
	ErrNotAdmitted = errors.New("breaker admission was not allowed")
	// ErrInvalidOutcome: Record was given an Outcome that is none of the three.
	ErrInvalidOutcome = errors.New("invalid breaker outcome")
)

// StaleError details a fenced Record. It matches ErrStaleAdmission.
type StaleError struct {
	Key string
	// Generation is the admission's, Current the breaker's.
	Generation, Current int64
	// LeaseGone is true when the generation matched but the trial lease had
	// expired or been dropped.
	LeaseGone bool
}

func (e *StaleError) Error() string {
	if e.LeaseGone {
		return fmt.Sprintf("breaker %q: trial lease of generation %d expired or was dropped", e.Key, e.Generation)
	}
	return fmt.Sprintf("breaker %q: admission of generation %d is stale (current %d)", e.Key, e.Generation, e.Current)
}

// Is makes errors.Is(err, ErrStaleAdmission) true.
func (e *StaleError) Is(target error) bool { return target == ErrStaleAdmission }

// Clock returns the current time. A nil Clock means the Redis server's TIME.
type Clock func() time.Time

// BreakerOption configures NewBreakers.
type BreakerOption func(*Breakers)

// WithClock injects the decision clock (tests): its milliseconds are passed
// to the scripts instead of the Redis server TIME. Never use it in
// production, where worker clocks may be skewed.
func WithClock(c Clock) BreakerOption { return func(b *Breakers) { b.clock = c } }

// WithLocalClock sets the process-local clock, used only when Redis cannot
// answer (the fallback decision of Allow). Zero means the decision clock when
// one was injected, else time.Now.
func WithLocalClock(c Clock) BreakerOption { return func(b *Breakers) { b.local = c } }

// WithLogger sets the logger; nil (the default) means slog.Default().
func WithLogger(l *slog.Logger) BreakerOption { return func(b *Breakers) { b.log = l } }

// WithCallTimeout bounds every Redis call whose context has no deadline;
// zero means 2s.
func WithCallTimeout(d time.Duration) BreakerOption { return func(b *Breakers) { b.timeout = d } }

// WithFlushInterval sets how often Start's loop flushes batched success
// counters; zero means 1s.
func WithFlushInterval(d time.Duration) BreakerOption { return func(b *Breakers) { b.flushEvery = d } }

// ScriptRunner runs a Redis script and returns its reply, like
// (*redis.Script).Run; see WithScriptRunner.
type ScriptRunner interface {
	Run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error)
}

// WithScriptRunner sends admissions and outcomes through r, e.g. a
// group-committing batcher that lets concurrent calls share one pipelined
// round trip. Every call is still one atomic script applied before it
// returns; nil keeps one round trip per call.
func WithScriptRunner(r ScriptRunner) BreakerOption { return func(b *Breakers) { b.runner = r } }

// FallbackRetry is the RetryAt offset Allow gives, when Redis is unavailable,
// to a breaker last seen half-open (or open past its cooldown): trials cannot
// be coordinated without Redis, so the fallback denies them.
const FallbackRetry = time.Second

// Breakers is the client of every shared breaker. It is safe for concurrent
// use; create one per process (or per test) with NewBreakers.
type Breakers struct {
	rdb        redis.UniversalClient
	clock      Clock
	local      Clock
	log        *slog.Logger
	timeout    time.Duration
	flushEvery time.Duration

	runner ScriptRunner // nil: each script call is its own round trip

	seen sync.Map // breaker key -> struct{}: already in the rkeys.Breakers() index
	view view     // local CLOSED view, live while Start's subscription is (breaker_view.go)

	mu      sync.Mutex
	pending map[string]int64    // batched happy-path successes, by key
	last    map[string]lastSeen // last state seen per key (for the fallback)

	runMu   sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

type lastSeen struct {
	state     BreakerState
	gen       int64
	cf        int
	openUntil time.Time
}

// NewBreakers returns a Breakers on rdb. It writes nothing: a new worker never
// resets shared state.
//
// Every call is bounded by its context's deadline, or by the call timeout
// when it has none. go-redis applies context deadlines to socket reads only
// when the client has Options.ContextTimeoutEnabled; without it a server that
// accepts but does not answer holds a call for the client's ReadTimeout
// (3s by default) per try. Workers should enable it.
func NewBreakers(rdb redis.UniversalClient, opts ...BreakerOption) *Breakers {
	b := &Breakers{rdb: rdb, pending: map[string]int64{}, last: map[string]lastSeen{}}
	for _, o := range opts {
		o(b)
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.timeout <= 0 {
		b.timeout = 2 * time.Second
	}
	if b.flushEvery <= 0 {
		b.flushEvery = time.Second
	}
	if c, ok := rdb.(*redis.Client); ok && !c.Options().ContextTimeoutEnabled {
		b.log.Debug("breaker: redis client has ContextTimeoutEnabled=false; calls are bounded by its ReadTimeout, not by the breaker's call timeout")
	}
	if b.local == nil {
		if b.clock != nil {
			b.local = b.clock
		} else {
			b.local = time.Now
		}
	}
	return b
}

// nowArg is ARGV "now": the injected clock's ms, or "" for Redis TIME.
func (b *Breakers) nowArg() string {
	if b.clock == nil {
		return ""
	}
	return fmt.Sprint(b.clock().UnixMilli())
}

// bound gives ctx the call timeout unless it already has a deadline.
func (b *Breakers) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, b.timeout)
}

// luaPrelude is shared by every breaker script.
//
//	now_ms(a)  - a's number, or the Redis server TIME in ms when a is "".
//	announce(channel, key, state, gen, cf, kind) - PUBLISH {key,state,generation,
//	  consecutive_failures,kind}; cf and kind may be nil. kind "count" marks a
//	  change of consecutive_failures within CLOSED (no transition).
const luaPrelude = `
local function now_ms(a)
  local n = tonumber(a)
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
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
// (generation+1, leases dropped) before slots are counted.
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
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
  return {1, state, gen, ARGV[4], 0, cf, 0}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {0, state, gen, '', tonumber(first[2]), cf, tonumber(first[2]) - now}
`)

// Allow asks whether a call to the backend behind key may proceed. In CLOSED
// it costs one EVALSHA (the first call per key and process also adds the key
// to the index in the same round trip) — or nothing, after Start, while the
// local view holds the breaker CLOSED (see breaker_view.go: the view follows
// the breaker event channel and is re-read from Redis at least every
// ViewTTL). When Redis is unavailable it returns
// an error wrapping ErrBreakerUnavailable together with an Admission decided
// from the last state this process saw: closed or unknown → allowed; open
// before its open_until → denied until then; otherwise denied for
// FallbackRetry. A fallback admission is never a trial (no Token).
func (b *Breakers) Allow(ctx context.Context, key string, cfg BreakerConfig) (Admission, error) {
	if adm, ok := b.closedLocally(key); ok {
		return adm, nil
	}
	epoch := b.view.snapshot()
	cfg = cfg.withDefaults()
	ctx, cancel := b.bound(ctx)
	defer cancel()
	res, err := b.run(ctx, allowScript, key,
		[]string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		b.nowArg(), cfg.HalfOpenMaxCalls, cfg.TrialLease.Milliseconds(), rand.Text(),
		rkeys.BreakerChannel(), key, "0")
	if err != nil {
		if rediserr.Unanswered(err) {
			adm := b.fallback(key)
			b.log.Warn("breaker: redis unavailable, using last seen state",
				"key", key, "allowed", adm.Allowed, "state", adm.State, "err", err)
			return adm, fmt.Errorf("breaker %q: %w: %w", key, ErrBreakerUnavailable, err)
		}
		return Admission{}, fmt.Errorf("breaker %q: allow: %w", key, err)
	}
	return b.admitted(key, "allow", res, epoch)
}

// admitted reads the reply of an admission script — {allowed 0|1, state,
// generation, token, retry_at ms, consecutive_failures, retry_in ms} — and
// remembers the state seen (for the fallback and, if still in epoch, the
// local view).
func (b *Breakers) admitted(key, op string, res any, epoch uint64) (Admission, error) {
	r, err := reply(res, 7)
	if err != nil {
		return Admission{}, fmt.Errorf("breaker %q: %s: %w", key, op, err)
	}
	adm := Admission{
		Allowed:             r.int(0) == 1,
		State:               BreakerState(r.str(1)),
		Generation:          r.int(2),
		Token:               r.str(3),
		ConsecutiveFailures: int(r.int(5)),
	}
	if ms := r.int(4); ms > 0 {
		adm.RetryAt = time.UnixMilli(ms)
	}
	if ms := r.int(6); ms > 0 {
		adm.RetryIn = time.Duration(ms) * time.Millisecond
	}
	ls := lastSeen{state: adm.State, gen: adm.Generation, cf: adm.ConsecutiveFailures}
	if adm.State == StateOpen {
		ls.openUntil = adm.RetryAt
	}
	b.remember(key, ls)
	b.view.put(key, epoch, viewEntry{state: adm.State, gen: adm.Generation, cf: adm.ConsecutiveFailures, at: b.local()})
	return adm, nil
}

// fallback decides an admission from the last state seen, on the local clock.
func (b *Breakers) fallback(key string) Admission {
	b.mu.Lock()
	ls, ok := b.last[key]
	b.mu.Unlock()
	if !ok || ls.state == StateClosed || ls.state == "" {
		return Admission{Allowed: true, State: StateClosed, Generation: ls.gen, ConsecutiveFailures: ls.cf}
	}
	now := b.local()
	adm := Admission{State: ls.state, Generation: ls.gen, ConsecutiveFailures: ls.cf}
	if ls.state == StateOpen && now.Before(ls.openUntil) {
		adm.RetryAt = ls.openUntil
	} else {
		adm.RetryAt = now.Add(FallbackRetry)
	}
	adm.RetryIn = adm.RetryAt.Sub(now)
	return adm
}

func (b *Breakers) remember(key string, ls lastSeen) {
	b.mu.Lock()
	b.last[key] = ls
	b.mu.Unlock()
}

// recordScript reports the outcome of an admitted call.
//
// KEYS[1] breaker hash, KEYS[2] trial leases.
// ARGV[1] now ms or "", ARGV[2] failure threshold, ARGV[3] cooldown ms,
// ARGV[4] outcome "s" success | "f" counted failure | "i" ignore,
// ARGV[5] admission generation, ARGV[6] admission token ("" if not a trial),
// ARGV[7] event channel, ARGV[8] breaker key.
// Returns {state, generation, code, open_until ms (0 if none),
// consecutive_failures}; code 0 applied, 1 stale generation, 2 trial lease
// expired or dropped. A stale "s"/"f" still bumps success_count/failure_count
// and last_success_at/last_failure_at; "i" never counts.
var recordScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local state, gen, cf, ou = load(KEYS[1])
local out, agen, token = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local code = 0
local function ret()
  if state ~= 'open' then ou = 0 end
  return {state, gen, code, ou, cf}
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
  cf = cf + 1
  if state == 'half_open' or cf >= tonumber(ARGV[2]) then
    state = 'open'
    gen = gen + 1
    ou = now + tonumber(ARGV[3])
    redis.call('DEL', KEYS[2])
    redis.call('HSET', KEYS[1], 'state', state, 'generation', gen, 'consecutive_failures', cf, 'open_until', ou)
    announce(ARGV[7], ARGV[8], state, gen, cf)
  else
    redis.call('HSET', KEYS[1], 'consecutive_failures', cf)
    announce(ARGV[7], ARGV[8], state, gen, cf, 'count')
  end
elseif state == 'half_open' then
  state = 'closed'
  gen = gen + 1
  cf = 0
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'state', state, 'generation', gen, 'consecutive_failures', 0)
  redis.call('HDEL', KEYS[1], 'open_until')
  announce(ARGV[7], ARGV[8], state, gen, 0)
elseif cf ~= 0 then
  cf = 0
  redis.call('HSET', KEYS[1], 'consecutive_failures', 0)
  announce(ARGV[7], ARGV[8], state, gen, 0, 'count')
end
return ret()
`)

// Record reports the outcome of a call admitted by Allow and returns the
// breaker state after it.
//
// The happy path costs nothing: a success of a call admitted in CLOSED with no
// consecutive failures is only counted in memory, and Flush (run by Start's
// loop) adds it to success_count later; such a success therefore does not
// reset a consecutive_failures count that other calls raised meanwhile.
// OutcomeIgnore of a closed-state admission costs nothing either. Every other
// Record is one EVALSHA.
//
// Record is detached from the caller's cancellation (a shutdown must still
// release its trial lease) but bounded by the call timeout. A fenced Record
// returns an error wrapping ErrStaleAdmission (a *StaleError); Redis being
// unreachable gives an error wrapping ErrBreakerUnavailable.
func (b *Breakers) Record(ctx context.Context, key string, cfg BreakerConfig, adm Admission, out Outcome) (BreakerState, error) {
	o, ok := out.lua()
	if !ok {
		return "", fmt.Errorf("breaker %q: %w: %d", key, ErrInvalidOutcome, int(out))
	}
	if !adm.Allowed {
		return adm.State, fmt.Errorf("breaker %q: %w", key, ErrNotAdmitted)
	}
	if adm.Token == "" && adm.State == StateClosed {
		switch {
		case out == OutcomeIgnore:
			return StateClosed, nil
		case out == OutcomeSuccess && adm.ConsecutiveFailures == 0:
			b.mu.Lock()
			b.pending[key]++
			b.mu.Unlock()
			return StateClosed, nil
		}
	}
	cfg = cfg.withDefaults()
	epoch := b.view.snapshot()
	ctx, cancel := b.bound(context.WithoutCancel(ctx))
	defer cancel()
	res, err := b.run(ctx, recordScript, key,
		[]string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		b.nowArg(), cfg.FailureThreshold, cfg.Cooldown.Milliseconds(), o,
		adm.Generation, adm.Token, rkeys.BreakerChannel(), key)
	if err != nil {
		if rediserr.Unanswered(err) {
			b.mu.Lock()
			st := b.last[key].state
			b.mu.Unlock()
			if st == "" {
				st = adm.State
			}
			return st, fmt.Errorf("breaker %q: record: %w: %w", key, ErrBreakerUnavailable, err)
		}
		return "", fmt.Errorf("breaker %q: record: %w", key, err)
	}
	r, err := reply(res, 5)
	if err != nil {
		return "", fmt.Errorf("breaker %q: record: %w", key, err)
	}
	state, gen, code := BreakerState(r.str(0)), r.int(1), r.int(2)
	ls := lastSeen{state: state, gen: gen, cf: int(r.int(4))}
	if ms := r.int(3); ms > 0 {
		ls.openUntil = time.UnixMilli(ms)
	}
	b.remember(key, ls)
	b.view.put(key, epoch, viewEntry{state: state, gen: gen, cf: ls.cf, at: b.local()})
	if code != 0 {
		return state, &StaleError{Key: key, Generation: adm.Generation, Current: gen, LeaseGone: code == 2}
	}
	return state, nil
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

// Trip opens the breaker of key until now+d (Redis time), whatever its
// state: an operator's override. Generation bumps, trials are dropped.
func (b *Breakers) Trip(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("breaker %q: trip duration must be positive, got %s", key, d)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	res, err := b.run(ctx, tripScript, key, []string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		b.nowArg(), d.Milliseconds(), rkeys.BreakerChannel(), key)
	if err != nil {
		return b.wrap(key, "trip", err)
	}
	r, err := reply(res, 2)
	if err != nil {
		return fmt.Errorf("breaker %q: trip: %w", key, err)
	}
	b.mu.Lock()
	ls := b.last[key]
	b.last[key] = lastSeen{state: StateOpen, gen: r.int(0), cf: ls.cf, openUntil: time.UnixMilli(r.int(1))}
	b.mu.Unlock()
	return nil
}

// resetScript closes the breaker.
//
// KEYS[1] breaker hash, KEYS[2] trial leases. ARGV[1] event channel,
// ARGV[2] breaker key. Returns the new generation.
var resetScript = redis.NewScript(luaPrelude + `
local state, gen = load(KEYS[1])
gen = gen + 1
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'state', 'closed', 'generation', gen, 'consecutive_failures', 0)
redis.call('HDEL', KEYS[1], 'open_until')
announce(ARGV[1], ARGV[2], 'closed', gen, 0)
return gen
`)

// Reset closes the breaker of key: consecutive failures 0, generation bumped,
// trials dropped (outstanding admissions become stale). The statistics
// (failure_count, success_count, timestamps) are kept.
func (b *Breakers) Reset(ctx context.Context, key string) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	res, err := b.run(ctx, resetScript, key, []string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		rkeys.BreakerChannel(), key)
	if err != nil {
		return b.wrap(key, "reset", err)
	}
	gen, ok := res.(int64)
	if !ok {
		return fmt.Errorf("breaker %q: reset: unexpected reply %T", key, res)
	}
	b.remember(key, lastSeen{state: StateClosed, gen: gen})
	return nil
}

// flushScript adds batched successes.
//
// KEYS[1] breaker hash. ARGV[1] now ms or "", ARGV[2] number of successes.
// Returns the new success_count.
var flushScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
redis.call('HSET', KEYS[1], 'last_success_at', now)
return redis.call('HINCRBY', KEYS[1], 'success_count', tonumber(ARGV[2]))
`)

// Flush writes the successes counted in memory by Record's happy path
// (success_count += n, last_success_at = now) in one pipelined round trip.
// Counts whose write failed are kept for the next Flush.
func (b *Breakers) Flush(ctx context.Context) error {
	b.mu.Lock()
	batch := b.pending
	b.pending = map[string]int64{}
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	keys := make([]string, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	exec := func(evalsha bool) ([]*redis.Cmd, error) {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			args := []any{b.nowArg(), batch[k]}
			if evalsha {
				cmds[i] = flushScript.EvalSha(ctx, pipe, []string{rkeys.Breaker(k)}, args...)
			} else {
				cmds[i] = flushScript.Eval(ctx, pipe, []string{rkeys.Breaker(k)}, args...)
			}
			pipe.SAdd(ctx, rkeys.Breakers(), k)
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := exec(true)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = exec(false)
	}
	var failed []string
	for i, c := range cmds {
		if c.Err() != nil {
			failed = append(failed, keys[i])
		} else {
			b.seen.Store(keys[i], struct{}{})
		}
	}
	if len(failed) > 0 {
		b.mu.Lock()
		for _, k := range failed {
			b.pending[k] += batch[k]
		}
		b.mu.Unlock()
	}
	if err != nil {
		return b.wrap(strings.Join(failed, ","), "flush", err)
	}
	return nil
}

// Start runs Flush every flush interval until ctx is done or Stop is called,
// then flushes one last time, and keeps the local CLOSED view live through a
// subscription to the breaker event channel meanwhile. Calling it again is a
// no-op.
func (b *Breakers) Start(ctx context.Context) {
	b.runMu.Lock()
	defer b.runMu.Unlock()
	if b.started || b.stopped {
		return
	}
	b.started = true
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	watched := make(chan struct{})
	go func() { defer close(watched); b.watch(ctx) }()
	go func() { b.loop(ctx); <-watched; close(b.done) }()
}

func (b *Breakers) loop(ctx context.Context) {
	t := time.NewTicker(b.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := b.Flush(context.WithoutCancel(ctx)); err != nil {
				b.log.Warn("breaker: final flush failed", "err", err)
			}
			return
		case <-t.C:
			if err := b.Flush(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("breaker: flush failed", "err", err)
			}
		}
	}
}

// Stop ends Start's loop, waits for its final flush and returns; without
// Start it flushes once. It is idempotent.
func (b *Breakers) Stop() {
	b.runMu.Lock()
	defer b.runMu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	if b.started {
		b.cancel()
		<-b.done
		return
	}
	if err := b.Flush(context.Background()); err != nil {
		b.log.Warn("breaker: final flush failed", "err", err)
	}
}

// run executes script for key in one round trip: EVALSHA (EVAL on NOSCRIPT).
// The first time this process touches key, the SADD to the rkeys.Breakers()
// index rides in the same pipeline (outside the script: the index is not in
// the breaker's hash slot).
func (b *Breakers) run(ctx context.Context, s *redis.Script, key string, keys []string, args ...any) (any, error) {
	if _, ok := b.seen.Load(key); ok {
		if b.runner != nil {
			return b.runner.Run(ctx, s, keys, args...)
		}
		return s.Run(ctx, b.rdb, keys, args...).Result()
	}
	exec := func(evalsha bool) (any, error) {
		pipe := b.rdb.Pipeline()
		var c *redis.Cmd
		if evalsha {
			c = s.EvalSha(ctx, pipe, keys, args...)
		} else {
			c = s.Eval(ctx, pipe, keys, args...)
		}
		sadd := pipe.SAdd(ctx, rkeys.Breakers(), key)
		_, _ = pipe.Exec(ctx)
		if sadd.Err() == nil {
			b.seen.Store(key, struct{}{})
		}
		return c.Result()
	}
	res, err := exec(true)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, err = exec(false)
	}
	return res, err
}

// wrap names the breaker and op in err and, when Redis gave no definite
// answer, wraps ErrBreakerUnavailable too. The test is rediserr.Unanswered,
// deliberately broader than rediserr.IsUnavailable (a closed client or a
// canceled context counts): whatever kept the breaker from reading the
// shared state, it falls back to the last state it saw; only a real reply
// (a script bug) is an error of its own.
func (b *Breakers) wrap(key, op string, err error) error {
	if rediserr.Unanswered(err) {
		return fmt.Errorf("breaker %q: %s: %w: %w", key, op, ErrBreakerUnavailable, err)
	}
	return fmt.Errorf("breaker %q: %s: %w", key, op, err)
}

// luaReply reads a script's array reply.
type luaReply []any

func reply(res any, n int) (luaReply, error) {
	a, ok := res.([]any)
	if !ok || len(a) < n {
		return nil, fmt.Errorf("unexpected script reply %#v", res)
	}
	return luaReply(a), nil
}

func (r luaReply) int(i int) int64 {
	switch v := r[i].(type) {
	case int64:
		return v
	case string:
		var n int64
		_, _ = fmt.Sscan(v, &n)
		return n
	}
	return 0
}

func (r luaReply) str(i int) string {
	switch v := r[i].(type) {
	case string:
		return v
	case int64:
		return fmt.Sprint(v)
	}
	return ""
}
