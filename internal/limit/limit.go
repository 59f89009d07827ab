package limit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
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

// admitScript admits a call against every limit of a key at once
// (lua/admit.lua documents its KEYS, ARGV and replies).
var admitScript = script("admit.lua")

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
	lease := defaults.Positive(cfg.Lease, DefaultLease)
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

// restampScript moves a call's start in the request log to now
// (lua/restamp.lua documents its KEYS, ARGV and replies).
var restampScript = script("restamp.lua")

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

// debitScript debits the tokens a call used (lua/debit.lua documents its KEYS, ARGV and replies).
var debitScript = script("debit.lua")

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

// pauseScript pauses a key fleet-wide, only ever extending a pause
// (lua/pause.lua documents its KEYS, ARGV and replies).
var pauseScript = script("pause.lua")

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

// pausedForScript reads the pause in force on a key (lua/paused_for.lua
// documents its KEYS, ARGV and replies).
var pausedForScript = script("paused_for.lua")

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

// resumeScript ends a key's pause now, an operator's override
// (lua/resume.lua documents its KEYS, ARGV and replies).
var resumeScript = script("resume.lua")

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
	err := l.rdb.HSet(ctx, rkeys.LimitState(key), fieldRequests, cfg.Requests, fieldTokens, cfg.Tokens,
		fieldPerMS, cfg.Per.Milliseconds(), fieldConcurrency, cfg.Concurrency).Err()
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

// statusScript reads a key's usage, read-only (lua/status.lua documents its KEYS, ARGV and replies).
var statusScript = script("status.lua")

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

// usedScript reads the tokens debited within a window, read-only
// (lua/used.lua documents its KEYS, ARGV and replies).
var usedScript = script("used.lua")

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
