package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/startstop"
)

// The shared circuit breaker: its types, options and client. Its design
// is in doc.go; its Lua scripts and their typed wrappers in scripts.go;
// admissions and outcomes in admit.go; the background flush of batched
// successes in loop.go; the local CLOSED view in view.go; health-probe
// admissions in probe_admit.go.

// Breaker state stored in Redis. The names are stable (JSON, CLI output).
type State string

// The three breaker states.
const (
	StateClosed   State = "closed"
	StateOpen     State = "open"
	StateHalfOpen State = "half_open"
)

// Mode is how a CLOSED breaker decides to open.
type Mode string

// The breaker modes.
const (
	// ModeRate (the default): open when, over the sliding Window of counted
	// calls of the key (the whole fleet's), failures/total ≥ FailureRate,
	// total ≥ MinCalls, and the failures came from at least
	// MinFailingTasks distinct tasks: one task's own failures never open it.
	ModeRate Mode = "rate"
	// ModeConsecutive: open after FailureThreshold consecutive counted
	// failures, whoever made them (the mode of agentq before rate mode).
	ModeConsecutive Mode = "consecutive"
)

// Config tunes one breaker. It is passed on every call, so it may come
// from per-agent configuration; workers sharing a key should share a config.
type Config struct {
	// Mode is ModeRate or ModeConsecutive. Zero means ModeConsecutive when
	// FailureThreshold is set (> 0), else ModeRate (see Resolved).
	Mode Mode
	// FailureThreshold is, in consecutive mode, the number of consecutive
	// counted failures that opens the breaker; zero (or negative) means 3.
	FailureThreshold int
	// Window is rate mode's sliding window; zero means 30s.
	Window time.Duration
	// FailureRate is rate mode's failure ratio (0 < r ≤ 1) that opens the
	// breaker; zero (or out of range) means 0.5.
	FailureRate float64
	// MinCalls is rate mode's minimum volume of counted calls within the
	// window; zero (or negative) means 100.
	MinCalls int
	// MinFailingTasks is rate mode's minimum number of distinct tasks whose
	// calls failed within the window; zero (or negative) means 3.
	MinFailingTasks int
	// Cooldown is how long the breaker stays OPEN before it admits trials;
	// zero (or negative) means 60s. Each failed half-open trial doubles the
	// next cooldown, up to MaxCooldown; closing resets it.
	Cooldown time.Duration
	// MaxCooldown caps the growing cooldown; zero (or negative) means 10m,
	// and it is never below Cooldown.
	MaxCooldown time.Duration
	// HalfOpenMaxCalls is the number of trials admitted cluster-wide per
	// half-open episode; zero (or negative) means 1.
	HalfOpenMaxCalls int
	// TrialLease is how long a trial may hold its slot before it expires and
	// the breaker may admit another trial; the caller passes the agent's
	// timeout plus a margin. Zero (or negative) means 60s.
	TrialLease time.Duration
}

// Defaults of Config.
const (
	DefaultFailureThreshold = 3
	DefaultWindow           = 30 * time.Second
	DefaultFailureRate      = 0.5
	DefaultMinCalls         = 100
	DefaultMinFailingTasks  = 3
	DefaultCooldown         = 60 * time.Second
	DefaultMaxCooldown      = 10 * time.Minute
	DefaultHalfOpenMaxCalls = 1
	DefaultTrialLease       = 60 * time.Second
)

// Resolved is the mode c runs in: Mode, or, when it is zero,
// ModeConsecutive if FailureThreshold is set and ModeRate otherwise.
func (c Config) Resolved() Mode {
	if c.Mode != "" {
		return c.Mode
	}
	if c.FailureThreshold > 0 {
		return ModeConsecutive
	}
	return ModeRate
}

func (c Config) withDefaults() Config {
	c.Mode = c.Resolved()
	c.FailureThreshold = defaults.Positive(c.FailureThreshold, DefaultFailureThreshold)
	c.Window = defaults.Positive(c.Window, DefaultWindow)
	if !(c.FailureRate > 0 && c.FailureRate <= 1) {
		c.FailureRate = DefaultFailureRate
	}
	c.MinCalls = defaults.Positive(c.MinCalls, DefaultMinCalls)
	c.MinFailingTasks = defaults.Positive(c.MinFailingTasks, DefaultMinFailingTasks)
	c.Cooldown = defaults.Positive(c.Cooldown, DefaultCooldown)
	c.MaxCooldown = max(defaults.Positive(c.MaxCooldown, DefaultMaxCooldown), c.Cooldown)
	c.HalfOpenMaxCalls = defaults.Positive(c.HalfOpenMaxCalls, DefaultHalfOpenMaxCalls)
	c.TrialLease = defaults.Positive(c.TrialLease, DefaultTrialLease)
	return c
}

// Outcome is what the caller reports to Record about an admitted call.
type Outcome int

// Outcomes. The zero Outcome is invalid, so a forgotten assignment is an
// error rather than a silent success.
const (
	// OutcomeSuccess: the backend answered well.
	OutcomeSuccess Outcome = iota + 1
	// OutcomeFailure: a counted failure (network, timeout, provider, …).
	OutcomeFailure
	// OutcomeIgnore: the call says nothing about the backend's health — it
	// was canceled (shutdown), failed with a class that does not count
	// against the breaker (a caller's error: invalid_request,
	// context_length, …), or was back-pressure the limits machinery handles
	// (a rate_limited reply with a reset): release any trial lease and
	// change nothing else.
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
		return luaSuccess, true
	case OutcomeFailure:
		return luaFailure, true
	case OutcomeIgnore:
		return luaIgnore, true
	}
	return "", false
}

// Admission is Allow's answer; pass it back unchanged to Record.
type Admission struct {
	// Allowed says whether the call may go to the backend.
	Allowed bool `json:"allowed"`
	// State is the breaker state seen at admission.
	State State `json:"state"`
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
	// ErrUnavailable: Redis could not be reached (or answered that it
	// cannot serve: LOADING, READONLY, …). Allow still returns an Admission
	// decided from the last state this process saw, so the caller may choose.
	ErrUnavailable = errors.New("circuit breaker unavailable")
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

// Option configures New.
type Option func(*Breakers)

// WithClock injects the decision clock (tests): its milliseconds are passed
// to the scripts instead of the Redis server TIME. Never use it in
// production, where worker clocks may be skewed.
func WithClock(c func() time.Time) Option { return func(b *Breakers) { b.clock = c } }

// WithLocalClock sets the process-local clock, used only when Redis cannot
// answer (the fallback decision of Allow). Zero means the decision clock when
// one was injected, else time.Now.
func WithLocalClock(c func() time.Time) Option { return func(b *Breakers) { b.local = c } }

// WithLogger sets the logger; nil (the default) means slog.Default().
func WithLogger(l *slog.Logger) Option { return func(b *Breakers) { b.log = l } }

// WithCallTimeout bounds every Redis call whose context has no deadline;
// zero means 2s.
func WithCallTimeout(d time.Duration) Option { return func(b *Breakers) { b.timeout = d } }

// WithFlushInterval sets how often Start's loop flushes batched success
// counters; zero means 1s.
func WithFlushInterval(d time.Duration) Option { return func(b *Breakers) { b.flushEvery = d } }

// WithRunner sends admissions and outcomes through r, e.g. a
// group-committing batcher that lets concurrent calls share one pipelined
// round trip. Every call is still one atomic script applied before it
// returns; nil keeps one round trip per call.
func WithRunner(r redisx.Runner) Option { return func(b *Breakers) { b.runner = r } }

// FallbackRetry is the RetryAt offset Allow gives, when Redis is unavailable,
// to a breaker last seen half-open (or open past its cooldown): trials cannot
// be coordinated without Redis, so the fallback denies them.
const FallbackRetry = time.Second

// Breakers is the client of every shared breaker. It is safe for concurrent
// use; create one per process (or per test) with New.
type Breakers struct {
	rdb        redis.UniversalClient
	clock      func() time.Time // nil: the Redis server's TIME
	local      func() time.Time
	log        *slog.Logger
	timeout    time.Duration
	flushEvery time.Duration

	runner redisx.Runner // the scripts' runner: WithRunner's, or redisx.Direct

	seen sync.Map // breaker key -> struct{}: already in the rkeys.Breakers() index
	view view     // local CLOSED view, live while Start's subscription is (view.go)

	mu      sync.Mutex
	pending map[string]pendingSuccesses // batched happy-path successes, by key
	hot     map[string]time.Time        // rate mode: local time until which key's window holds failures
	last    map[string]lastSeen         // last state seen per key (for the fallback)

	lifecycle startstop.Loop // Start's flush loop and event subscription
}

// pendingSuccesses are a key's batched successes: n of them, and, for a
// rate-mode key, its window (the flush counts them in it too).
type pendingSuccesses struct {
	n        int64
	windowMS int64 // 0: consecutive mode
}

type lastSeen struct {
	state     State
	gen       int64
	cf        int
	openUntil time.Time
}

// New returns a Breakers on rdb. It writes nothing: a new worker never
// resets shared state.
//
// Every call is bounded by its context's deadline, or by the call timeout
// when it has none. go-redis applies context deadlines to socket reads only
// when the client has Options.ContextTimeoutEnabled; without it a server that
// accepts but does not answer holds a call for the client's ReadTimeout
// (3s by default) per try. Workers should enable it.
func New(rdb redis.UniversalClient, opts ...Option) *Breakers {
	b := &Breakers{rdb: rdb, pending: map[string]pendingSuccesses{}, hot: map[string]time.Time{}, last: map[string]lastSeen{}}
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
	if b.runner == nil {
		b.runner = redisx.Direct(rdb)
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

// wrap names the breaker and op in err and, when Redis gave no definite
// answer, wraps ErrUnavailable too. The test is redisx.Unanswered,
// deliberately broader than redisx.IsUnavailable (a closed client or a
// canceled context counts): whatever kept the breaker from reading the
// shared state, it falls back to the last state it saw; only a real reply
// (a script bug) is an error of its own.
func (b *Breakers) wrap(key, op string, err error) error {
	if redisx.Unanswered(err) {
		return fmt.Errorf("breaker %q: %s: %w: %w", key, op, ErrUnavailable, err)
	}
	return fmt.Errorf("breaker %q: %s: %w", key, op, err)
}
