package limit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// Config is the configuration of one limits key. Zero fields are "no
// limit"; workers sharing a key should pass the same values (the config
// refuses agents that share a key with different numbers).
type Config struct {
	// Requests is the number of calls that may start within any window of
	// Per. Zero → no request limit.
	Requests int `json:"requests,omitempty"`
	// Tokens is the number of tokens the calls started within any window
	// of Per may use. Zero → no token limit.
	Tokens int64 `json:"tokens,omitempty"`
	// Per is the window of Requests and Tokens; zero → no window (then
	// Requests and Tokens are ignored).
	Per time.Duration `json:"-"`
	// Concurrency is the number of calls in flight at once. Zero → no
	// concurrency limit.
	Concurrency int `json:"concurrency,omitempty"`
	// Lease is how long an admitted call holds its concurrency slot when
	// it is never released (a killed worker): the agent's timeout plus a
	// margin. Zero → DefaultLease.
	Lease time.Duration `json:"-"`
}

// DefaultLease is Config.Lease's zero value.
const DefaultLease = 60 * time.Second

// RequestGuard is the extra time the request limit keeps between a call
// and the requests-th call after it: min(MaxRequestGuard, Per/20). A call
// reaches the provider a little after its admission, and not always as
// quickly; the guard keeps those delays from letting the provider see
// more than Requests calls in one window of Per. It costs at most 5% of
// the limit's throughput.
func RequestGuard(per time.Duration) time.Duration { return min(MaxRequestGuard, per/20) }

// MaxRequestGuard bounds RequestGuard.
const MaxRequestGuard = 50 * time.Millisecond

// Kind names the limit that refused an admission (stable names: history,
// metrics label "limit", JSON).
type Kind string

// The limits.
const (
	Requests    Kind = "requests"
	Tokens      Kind = "tokens"
	Concurrency Kind = "concurrency"
	Paused      Kind = "paused"
	// Unavailable: Redis could not answer, so the limits could not be
	// checked; the call waits rather than risk going over them.
	Unavailable Kind = "unavailable"
)

// UnavailableRetry is the RetryIn of a Unavailable refusal.
const UnavailableRetry = time.Second

// Admission is Admit's answer.
type Admission struct {
	// Allowed says whether the call may start.
	Allowed bool
	// Limit is, when refused, the limit that refused it.
	Limit Kind
	// RetryIn is, when refused, how long until the limit may admit a call
	// by the limiter's clock (Redis TIME): until the oldest start or debit
	// leaves the window, or the pause ends. Zero for concurrency: a slot
	// frees when a call ends, which nobody can tell in advance.
	RetryIn time.Duration
	// PausedUntil is, for Paused, the end of the pause.
	PausedUntil time.Time
	// Lease is the concurrency lease to give back with Release ("" when
	// the key has no concurrency limit).
	Lease string
	// Start is the call's entry in the request log ("" when the key has no
	// request limit), for Restamp; At is when Admit returned (local clock).
	Start string
	At    time.Time
}

// Status is the state of one limits key: the view of inspector
// limits and of the limits object of /api/v1/agents. Fields may be added,
// never renamed.
type Status struct {
	Key string `json:"key"`
	// Requests, Tokens, Per and Concurrency are the configuration the
	// workers last registered (0: no such limit; Per "" when none).
	Requests    int           `json:"requests"`
	Tokens      int64         `json:"tokens"`
	Per         time.Duration `json:"-"`
	PerText     string        `json:"per"`
	Concurrency int           `json:"concurrency"`
	// RequestsInWindow and TokensInWindow are the calls started and the
	// tokens debited within the last Per; InFlight the calls holding a
	// concurrency lease.
	RequestsInWindow int64 `json:"requests_in_window"`
	TokensInWindow   int64 `json:"tokens_in_window"`
	InFlight         int64 `json:"in_flight"`
	// PausedUntil is the end of a fleet-wide pause in force (nil: none),
	// PauseReason what the provider said.
	PausedUntil *time.Time `json:"paused_until"`
	PauseReason string     `json:"pause_reason"`
	// Refusals counts the admissions refused, by limit, fleet-wide, since
	// the key was first used (a task may be refused several times while it
	// waits in its worker before it is deferred).
	Refusals map[Kind]int64 `json:"refusals"`
}

// SetConfig makes c the status's configuration (when c sets any limit).
func (s *Status) SetConfig(c Config) {
	if c.Requests == 0 && c.Tokens == 0 && c.Concurrency == 0 {
		return
	}
	s.Requests, s.Tokens, s.Per, s.Concurrency, s.PerText = c.Requests, c.Tokens, c.Per, c.Concurrency, ""
	if c.Per > 0 {
		s.PerText = c.Per.String()
	}
}

// Config is the status's registered configuration.
func (s Status) Config() Config {
	return Config{Requests: s.Requests, Tokens: s.Tokens, Per: s.Per, Concurrency: s.Concurrency}
}

// ErrUnavailable: Redis could not be reached (or the call was
// canceled). Admit then refuses with Unavailable: limits cannot be
// checked without Redis, and a call made anyway could go over them.
var ErrUnavailable = errors.New("limiter unavailable")

// Limiter is the client of every limits key. Safe for concurrent use.
type Limiter struct {
	rdb   redis.UniversalClient
	clock func() time.Time // nil: the Redis server's TIME
	run   redisx.Runner
}

// Option configures New.
type Option func(*Limiter)

// WithClock injects the decision clock (tests): its milliseconds
// are passed to the scripts instead of the Redis server TIME.
func WithClock(c func() time.Time) Option { return func(l *Limiter) { l.clock = c } }

// WithRunner sends the scripts through r (e.g. a batcher).
func WithRunner(r redisx.Runner) Option { return func(l *Limiter) { l.run = r } }

// New returns a Limiter on rdb. It writes nothing.
func New(rdb redis.UniversalClient, opts ...Option) *Limiter {
	l := &Limiter{rdb: rdb}
	for _, o := range opts {
		o(l)
	}
	if l.run == nil {
		l.run = redisx.Direct(rdb)
	}
	return l
}

func (l *Limiter) nowArg() string {
	if l.clock == nil {
		return ""
	}
	return fmt.Sprint(l.clock().UnixMilli())
}

func (l *Limiter) wrap(key, op string, err error) error {
	if redisx.Unanswered(err) {
		return fmt.Errorf("limits %q: %s: %w: %w", key, op, ErrUnavailable, err)
	}
	return fmt.Errorf("limits %q: %s: %w", key, op, err)
}

func limitKeys(key string) []string {
	return []string{rkeys.LimitState(key), rkeys.LimitStarts(key), rkeys.LimitLeases(key), rkeys.LimitTokens(key)}
}

// limitPrelude is shared by the limit scripts.
//
//	now_ms(a)      - redisx.LuaNowMS.
//	prune_tokens(state, log, now, per) - drops debits older than the window
//	  from log, subtracts them from state's tokens_used, and returns the
//	  tokens used within the window.
const limitPrelude = redisx.LuaNowMS + `
local function debit_of(m)
  return tonumber(string.match(m, ':(%d+)$')) or 0
end
local function prune_tokens(state, log, now, per)
  if redis.call('EXISTS', log) == 0 then
    redis.call('HDEL', state, 'tokens_used')
    return 0
  end
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - per)
  if #old > 0 then
    local sum = 0
    for _, m in ipairs(old) do sum = sum + debit_of(m) end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - per)
    redis.call('HINCRBY', state, 'tokens_used', -sum)
  end
  return tonumber(redis.call('HGET', state, 'tokens_used')) or 0
end
`

// admitScript admits a call against every limit of a key at once.
//
// KEYS[1] state hash, KEYS[2] starts log (zset seq -> start ms), KEYS[3]
// leases (zset token -> expiry ms), KEYS[4] token debits (zset
// "seq:tokens" -> ms).
// ARGV[1] now ms or "" (Redis TIME), ARGV[2] requests (0: none), ARGV[3]
// request window ms (per + guard), ARGV[4] tokens (0: none), ARGV[5] per
// ms, ARGV[6] concurrency (0: none), ARGV[7] lease ms, ARGV[8] lease token.
// Returns {allowed 0|1, limit ("" when allowed), retry_in ms (0: unknown),
// paused_until ms (0: none), start log member ("" when none)}.
//
// Checks, in order: the pause, concurrency (expired leases are dropped
// when the count reaches the limit), requests (the sliding log: a call may
// start when fewer than `requests` starts lie within the window; else retry
// when the requests-th most recent one leaves it; starts that left the
// window are dropped when the count reaches the limit, so the log holds at
// most `requests` entries plus those of the last window), tokens (the window's debits ≥ tokens refuses; retry when
// enough old debits leave it). An admitted call is logged (a start, a lease)
// in the same step, so no two admissions can see the same free slot.
var admitScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local req, win = tonumber(ARGV[2]), tonumber(ARGV[3])
local tok, per = tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local paused = tonumber(redis.call('HGET', KEYS[1], 'paused_until')) or 0
if paused > now then
  redis.call('HINCRBY', KEYS[1], 'deferrals:paused', 1)
  return {0, 'paused', paused - now, paused, ''}
end
if conc > 0 and redis.call('ZCARD', KEYS[3]) >= conc then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= conc then
    redis.call('HINCRBY', KEYS[1], 'deferrals:concurrency', 1)
    return {0, 'concurrency', 0, 0, ''}
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
    redis.call('HINCRBY', KEYS[1], 'deferrals:requests', 1)
    return {0, 'requests', math.max(1, tonumber(e[2]) + win - now), 0, ''}
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
    redis.call('HINCRBY', KEYS[1], 'deferrals:tokens', 1)
    return {0, 'tokens', math.max(1, retry), 0, ''}
  end
end
local start = ''
if req > 0 and win > 0 then
  start = tostring(redis.call('HINCRBY', KEYS[1], 'seq', 1))
  redis.call('ZADD', KEYS[2], now, start)
  redis.call('PEXPIRE', KEYS[2], win)
end
if conc > 0 then
  redis.call('ZADD', KEYS[3], now + lease, ARGV[8])
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[3], tonumber(last[2]))
end
return {1, '', 0, 0, start}
`)

// newLeaseToken returns a random concurrency lease token.
func newLeaseToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Admit asks key's limits for a call. A refusal says which limit and how
// long until it may admit. When Redis cannot answer, Admit refuses with
// Unavailable and RetryIn UnavailableRetry, and returns the error
// (wrapping ErrUnavailable when Redis gave no answer).
func (l *Limiter) Admit(ctx context.Context, key string, cfg Config) (Admission, error) {
	lease := cfg.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	token := ""
	if cfg.Concurrency > 0 {
		token = newLeaseToken()
	}
	req, tok, win, per := 0, int64(0), int64(0), cfg.Per.Milliseconds()
	if cfg.Per > 0 {
		req, tok = cfg.Requests, cfg.Tokens
		win = (cfg.Per + RequestGuard(cfg.Per)).Milliseconds()
	}
	res, err := l.run.Run(ctx, admitScript, limitKeys(key),
		l.nowArg(), req, win, tok, per, cfg.Concurrency, lease.Milliseconds(), token)
	if err != nil {
		return Admission{Limit: Unavailable, RetryIn: UnavailableRetry}, l.wrap(key, "admit", err)
	}
	r, err := redisx.ParseReply(res, 5)
	if err != nil {
		return Admission{Limit: Unavailable, RetryIn: UnavailableRetry}, l.wrap(key, "admit", err)
	}
	if r.Int(0) == 1 {
		return Admission{Allowed: true, Lease: token, Start: r.Str(4), At: time.Now()}, nil
	}
	a := Admission{Limit: Kind(r.Str(1)), RetryIn: time.Duration(r.Int(2)) * time.Millisecond}
	if p := r.Int(3); p > 0 {
		a.PausedUntil = time.UnixMilli(p).UTC()
	}
	return a, nil
}

// restampScript moves a call's start in the request log to now.
//
// KEYS[2] starts log. ARGV[1] now ms or "", ARGV[2] the start member,
// ARGV[3] request window ms. Returns 1 when moved, 0 when the entry is
// gone or already out of its window (then it no longer counts, and moving
// it would add a start no admission allowed).
// Moving a start later is always safe: its admission counted it in every
// window that holds the admission time, and every window that holds now
// counts it already (a later admission saw it within its window).
var restampScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local at = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not at or tonumber(at) >= now or now - tonumber(at) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return 1
`)

// Restamp moves an admitted call's start in the request log to now: the
// caller saw its call actually leave later than its admission (a stalled
// process), and the provider counts when it arrives. Later admissions then
// keep their distance from the real start. No-op without a request limit.
func (l *Limiter) Restamp(ctx context.Context, key string, cfg Config, a Admission) error {
	if a.Start == "" || cfg.Per <= 0 {
		return nil
	}
	win := (cfg.Per + RequestGuard(cfg.Per)).Milliseconds()
	if _, err := l.run.Run(ctx, restampScript, limitKeys(key), l.nowArg(), a.Start, win); err != nil {
		return l.wrap(key, "restamp", err)
	}
	return nil
}

// Release gives back an admission's concurrency lease when its call ends
// (or was never made). A lease not released expires on its own.
func (l *Limiter) Release(ctx context.Context, key string, a Admission) error {
	if a.Lease == "" {
		return nil
	}
	if err := l.rdb.ZRem(ctx, rkeys.LimitLeases(key), a.Lease).Err(); err != nil {
		return l.wrap(key, "release", err)
	}
	return nil
}

// debitScript debits the tokens a call used.
//
// KEYS[1] state hash, KEYS[4] token debits. ARGV[1] now ms or "", ARGV[2]
// per ms, ARGV[3] tokens (> 0). Returns the tokens used within the window.
var debitScript = redis.NewScript(limitPrelude + `
local now, per, n = now_ms(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
prune_tokens(KEYS[1], KEYS[4], now, per)
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('ZADD', KEYS[4], now, seq .. ':' .. n)
redis.call('PEXPIRE', KEYS[4], per)
return redis.call('HINCRBY', KEYS[1], 'tokens_used', n)
`)

// Debit records that a call of key used tokens (its reply's usage); it
// counts against the token limit for Per. It is a no-op without a token
// limit or when tokens ≤ 0. It returns the tokens used within the window.
func (l *Limiter) Debit(ctx context.Context, key string, cfg Config, tokens int64) (int64, error) {
	if cfg.Tokens <= 0 || cfg.Per <= 0 || tokens <= 0 {
		return 0, nil
	}
	res, err := l.run.Run(ctx, debitScript, limitKeys(key), l.nowArg(), cfg.Per.Milliseconds(), tokens)
	if err != nil {
		return 0, l.wrap(key, "debit", err)
	}
	n, _ := res.(int64)
	return n, nil
}

// pauseScript pauses a key fleet-wide, only ever extending a pause.
//
// KEYS[1] state hash. ARGV[1] now ms or "", ARGV[2] pause ms, ARGV[3]
// reason. Returns {paused_until ms in effect, 1 if this call extended it}.
var pauseScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local want = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], 'paused_until')) or 0
if want <= cur then return {cur, 0} end
redis.call('HSET', KEYS[1], 'paused_until', want, 'paused_reason', ARGV[3])
return {want, 1}
`)

// Pause stops every admission of key for d from now (Redis TIME), with
// reason (history, inspector): the provider said the key is exhausted. A
// pause is only ever extended, never shortened. It returns the end of the
// pause in effect and whether this call extended it. A pause that took
// effect registers key (Keys), so that inspector limits shows and limits
// resume knows the pause of a key no limits block configures (an HTTP
// agent's breaker key).
func (l *Limiter) Pause(ctx context.Context, key string, d time.Duration, reason string) (time.Time, bool, error) {
	if d <= 0 {
		return time.Time{}, false, nil
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	res, err := l.run.Run(ctx, pauseScript, limitKeys(key), l.nowArg(), ms, reason)
	if err != nil {
		return time.Time{}, false, l.wrap(key, "pause", err)
	}
	r, err := redisx.ParseReply(res, 2)
	if err != nil {
		return time.Time{}, false, l.wrap(key, "pause", err)
	}
	until, extended := time.UnixMilli(r.Int(0)).UTC(), r.Int(1) == 1
	if extended {
		// The registry is another hash slot: a second command, on a pause
		// only (rare). The pause itself is in force either way.
		if err := l.rdb.SAdd(ctx, rkeys.Limits(), key).Err(); err != nil {
			return until, extended, l.wrap(key, "register", err)
		}
	}
	return until, extended, nil
}

// pausedForScript reads the pause in force on a key.
//
// KEYS[1] state hash. ARGV[1] now ms or "". Returns the ms left of the
// pause in force (0: none).
var pausedForScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], 'paused_until')) or 0
if cur > now then return cur - now end
return 0
`)

// PausedFor returns how long key's fleet-wide pause has left (0: none), by
// the Redis clock: the one read an agent without limits makes (at most
// once a second per process) to honour the pauses its replies set.
func (l *Limiter) PausedFor(ctx context.Context, key string) (time.Duration, error) {
	res, err := l.run.Run(ctx, pausedForScript, limitKeys(key), l.nowArg())
	if err != nil {
		return 0, l.wrap(key, "paused", err)
	}
	ms, ok := res.(int64)
	if !ok {
		return 0, l.wrap(key, "paused", fmt.Errorf("unexpected script reply %T", res))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// resumeScript ends a key's pause now (an operator's override).
//
// KEYS[1] state hash. ARGV[1] now ms or "".
// Returns {paused_until ms of the pause that was in force (0: none),
// its reason ("" when none)}. A pause already over is cleared too.
var resumeScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'paused_until', 'paused_reason')
if not h[1] then return {0, ''} end
redis.call('HDEL', KEYS[1], 'paused_until', 'paused_reason')
local pu = tonumber(h[1]) or 0
if pu <= now then return {0, ''} end
return {pu, h[2] or ''}
`)

// Resume ends key's fleet-wide pause now, as if the provider had not
// asked for it: the next admission is checked against the limits alone.
// It returns the end and reason of the pause that was in force (zero time
// and "" when none was). Tasks already deferred for the pause keep their
// due time (at most the pause's end). It does not create the key.
func (l *Limiter) Resume(ctx context.Context, key string) (until time.Time, reason string, err error) {
	res, err := l.run.Run(ctx, resumeScript, []string{rkeys.LimitState(key)}, l.nowArg())
	if err != nil {
		return time.Time{}, "", l.wrap(key, "resume", err)
	}
	r, err := redisx.ParseReply(res, 2)
	if err != nil {
		return time.Time{}, "", l.wrap(key, "resume", err)
	}
	if p := r.Int(0); p > 0 {
		return time.UnixMilli(p).UTC(), r.Str(1), nil
	}
	return time.Time{}, "", nil
}

// Register records key's configuration for inspection (inspector limits,
// the agents API) and adds key to the index of limits keys. Workers call it
// at start; it changes no usage.
func (l *Limiter) Register(ctx context.Context, key string, cfg Config) error {
	err := l.rdb.HSet(ctx, rkeys.LimitState(key), "requests", cfg.Requests, "tokens", cfg.Tokens,
		"per_ms", cfg.Per.Milliseconds(), "concurrency", cfg.Concurrency).Err()
	if err == nil {
		err = l.rdb.SAdd(ctx, rkeys.Limits(), key).Err()
	}
	if err != nil {
		return l.wrap(key, "register", err)
	}
	return nil
}

// Keys returns every registered limits key, unsorted.
func (l *Limiter) Keys(ctx context.Context) ([]string, error) {
	keys, err := l.rdb.SMembers(ctx, rkeys.Limits()).Result()
	if err != nil {
		return nil, l.wrap("*", "list", err)
	}
	return keys, nil
}

// statusScript reads a key's usage, read-only.
//
// KEYS as admitScript's. ARGV[1] now ms or "".
// Returns {requests, tokens, per_ms, concurrency, starts within the window,
// tokens within the window, leases live, paused_until ms, paused_reason,
// deferrals: requests, tokens, concurrency, paused}.
var statusScript = redis.NewScript(limitPrelude + `
local now = now_ms(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'requests', 'tokens', 'per_ms', 'concurrency', 'paused_until', 'paused_reason',
  'deferrals:requests', 'deferrals:tokens', 'deferrals:concurrency', 'deferrals:paused')
local per = tonumber(h[3]) or 0
local starts, used = 0, 0
if per > 0 then
  starts = redis.call('ZCOUNT', KEYS[2], '(' .. (now - per), '+inf')
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. (now - per), '+inf')) do used = used + debit_of(m) end
end
local live = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local pu, why = tonumber(h[5]) or 0, h[6] or ''
if pu <= now then pu, why = 0, '' end
return {tonumber(h[1]) or 0, tonumber(h[2]) or 0, per, tonumber(h[4]) or 0, starts, used, live,
  pu, why, tonumber(h[7]) or 0, tonumber(h[8]) or 0, tonumber(h[9]) or 0, tonumber(h[10]) or 0}
`)

// Status reads key's configuration and usage: requests started and
// tokens used within the last Per, calls in flight, the pause, and the
// refusals by limit since the key was first used.
func (l *Limiter) Status(ctx context.Context, key string) (Status, error) {
	res, err := statusScript.Run(ctx, l.rdb, limitKeys(key), l.nowArg()).Result()
	if err != nil {
		return Status{}, l.wrap(key, "status", err)
	}
	r, err := redisx.ParseReply(res, 13)
	if err != nil {
		return Status{}, l.wrap(key, "status", err)
	}
	per := time.Duration(r.Int(2)) * time.Millisecond
	st := Status{
		Key: key, Requests: int(r.Int(0)), Tokens: r.Int(1), Per: per, Concurrency: int(r.Int(3)),
		RequestsInWindow: r.Int(4), TokensInWindow: r.Int(5), InFlight: r.Int(6), PauseReason: r.Str(8),
		Refusals: map[Kind]int64{Requests: r.Int(9), Tokens: r.Int(10), Concurrency: r.Int(11), Paused: r.Int(12)},
	}
	if per > 0 {
		st.PerText = per.String()
	}
	if p := r.Int(7); p > 0 {
		t := time.UnixMilli(p).UTC()
		st.PausedUntil = &t
	}
	return st, nil
}

// usedScript reads the tokens debited within a window, read-only.
//
// KEYS[4] token debits. ARGV[1] now ms or "", ARGV[2] per ms.
// Returns {tokens debited within the last per, ms until the oldest of
// them leaves the window (0: none)}.
var usedScript = redis.NewScript(limitPrelude + `
local now, per = now_ms(ARGV[1]), tonumber(ARGV[2])
local used, first = 0, 0
for i, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. (now - per), '+inf', 'WITHSCORES')) do
  if i % 2 == 1 then used = used + debit_of(m) elseif first == 0 then first = tonumber(m) + per - now end
end
return {used, first}
`)

// Used returns the tokens debited to key within the last per, and how
// long until the oldest of them leaves the window (0: none), without
// changing anything: the view of a budget (package budget), whose
// configuration is not registered with the key.
func (l *Limiter) Used(ctx context.Context, key string, per time.Duration) (int64, time.Duration, error) {
	res, err := l.run.Run(ctx, usedScript, limitKeys(key), l.nowArg(), per.Milliseconds())
	if err != nil {
		return 0, 0, l.wrap(key, "used", err)
	}
	r, err := redisx.ParseReply(res, 2)
	if err != nil {
		return 0, 0, l.wrap(key, "used", err)
	}
	return r.Int(0), time.Duration(r.Int(1)) * time.Millisecond, nil
}

// Forget deletes key's window and counters (an operator's reset of a
// budget): its debits no longer count.
func (l *Limiter) Forget(ctx context.Context, key string) error {
	if err := l.rdb.Del(ctx, limitKeys(key)...).Err(); err != nil {
		return l.wrap(key, "forget", err)
	}
	return nil
}
