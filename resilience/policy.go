package resilience

import (
	"errors"
	"fmt"
	"time"
)

// OnExhausted says what happens to a run whose attempts are used up (or whose
// class is not retried within a run).
type OnExhausted string

// The two ways a run can end in failure.
const (
	// Restart schedules the task as a fresh run later (package restart).
	Restart OnExhausted = "restart"
	// DeadLetter moves the task to the dead-letter store.
	DeadLetter OnExhausted = "dead_letter"
)

// Rule is one row of the decision table.
type Rule struct {
	// Retry reports whether the class is retried within a run.
	Retry bool
	// CountsForBreaker reports whether a failure of this class counts against
	// the agent's circuit breaker.
	CountsForBreaker bool
	// Exhausted is what happens when no retry is left (or none is allowed).
	// "" is treated as DeadLetter.
	Exhausted OnExhausted
	// Fallback reports whether a failed call of this class goes at once, in
	// the same delivery, to the agent's next fallback agent (when it has
	// one). The zero value, false, keeps the failure with the agent.
	Fallback bool
}

// Policy is the decision table of DESIGN.md §2, one Rule per class. Every
// cell is configurable; a nil Policy behaves as DefaultPolicy().
type Policy map[Class]Rule

// DefaultPolicy returns DESIGN.md's default table:
//
//	class                                 retry  breaker  exhausted    fallback
//	network_transient, timeout            yes    yes      restart      no
//	rate_limited, provider_error          yes    yes      restart      yes
//	quota_exhausted                       no     yes      dead_letter  yes
//	network_permanent                     no     yes      dead_letter  no
//	context_length, invalid_request,      no     no       dead_letter  no
//	not_supported, logic_error
//	canceled                              no     no       "" (requeued by Decide)
//
// Fallback is on for the classes that say "this provider cannot serve you
// now" (overloaded, rate-limited, out of quota, failing) and off for those
// that another agent would most likely fail the same way (a bad request,
// a context too long) or that describe our own network.
func DefaultPolicy() Policy {
	retryable := Rule{Retry: true, CountsForBreaker: true, Exhausted: Restart}
	retryableFallback := Rule{Retry: true, CountsForBreaker: true, Exhausted: Restart, Fallback: true}
	backendFatal := Rule{Retry: false, CountsForBreaker: true, Exhausted: DeadLetter}
	callerFatal := Rule{Retry: false, CountsForBreaker: false, Exhausted: DeadLetter}
	return Policy{
		NetworkTransient: retryable,
		Timeout:          retryable,
		RateLimited:      retryableFallback,
		ProviderError:    retryableFallback,
		QuotaExhausted:   Rule{Retry: false, CountsForBreaker: true, Exhausted: DeadLetter, Fallback: true},
		NetworkPermanent: backendFatal,
		ContextLength:    callerFatal,
		InvalidRequest:   callerFatal,
		NotSupported:     callerFatal,
		LogicError:       callerFatal,
		Canceled:         {},
	}
}

var defaultPolicy = DefaultPolicy()

// Rule returns the rule for class c. A known class missing from p gets the
// default table's rule; an unknown class gets provider_error's rule (from p
// if present), since an unrecognised failure is treated as a backend failure.
func (p Policy) Rule(c Class) Rule {
	if r, ok := p[c]; ok {
		return r
	}
	if c.Valid() {
		return defaultPolicy[c]
	}
	if r, ok := p[ProviderError]; ok {
		return r
	}
	return defaultPolicy[ProviderError]
}

// CountsForBreaker reports whether a failure of class c counts against the
// breaker. Success ("") and canceled never count.
func (p Policy) CountsForBreaker(c Class) bool {
	if c == "" || c == Canceled {
		return false
	}
	return p.Rule(c).CountsForBreaker
}

// FallsBack reports whether a failed call of class c goes to the next
// fallback agent. Success ("") and canceled never do.
func (p Policy) FallsBack(c Class) bool {
	if c == "" || c == Canceled {
		return false
	}
	return p.Rule(c).Fallback
}

// With returns a copy of p (of the default table when p is nil) with
// overrides applied; p itself is not modified.
func (p Policy) With(overrides map[Class]Rule) Policy {
	base := p
	if base == nil {
		base = defaultPolicy
	}
	out := make(Policy, len(base)+len(overrides))
	for c, r := range base {
		out[c] = r
	}
	for c, r := range overrides {
		out[c] = r
	}
	return out
}

// ErrInvalidPolicy is returned (wrapped) by Policy.Validate.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// Validate reports unknown classes and unknown Exhausted values.
func (p Policy) Validate() error {
	for c, r := range p {
		if !c.Valid() {
			return fmt.Errorf("%w: unknown error class %q (want one of %v)", ErrInvalidPolicy, c, Classes())
		}
		switch r.Exhausted {
		case "", Restart, DeadLetter:
		default:
			return fmt.Errorf("%w: class %s: on_exhausted %q (want %q or %q)", ErrInvalidPolicy, c, r.Exhausted, Restart, DeadLetter)
		}
	}
	return nil
}

// Action is what the pipeline does after an attempt.
type Action string

// The actions of a Decision.
const (
	ActionSucceed    Action = "succeed"
	ActionRetry      Action = "retry"
	ActionRestart    Action = "restart"
	ActionDeadLetter Action = "dead_letter"
	ActionRequeue    Action = "requeue"
)

// Reasons a Decision gives.
const (
	ReasonRetryable          = "retryable"             // retry: the class is retried within a run
	ReasonBackendSaidRetry   = "backend_said_retry"    // retry: x-should-retry: true overrode a no-retry rule
	ReasonAttemptsExhausted  = "attempts_exhausted"    // restart/dead_letter: MaxAttempts reached
	ReasonNotRetryable       = "not_retryable"         // restart/dead_letter: the class is not retried
	ReasonBackendSaidNoRetry = "backend_said_no_retry" // restart/dead_letter: x-should-retry: false
	ReasonRetryAfterTooLong  = "retry_after_too_long"  // restart/dead_letter: Retry-After above MaxRetryAfter
	ReasonCanceled           = "canceled"              // requeue: shutdown cancellation
)

// Decision is the policy's answer for one failed (or successful) attempt.
type Decision struct {
	Action Action
	// Delay is the wait before the retry. For a restart it is the backend's
	// Retry-After hint (0 if none), which the restart scheduler may use as a
	// lower bound for its own delay; otherwise 0.
	Delay time.Duration
	// Class is the verdict's class.
	Class Class
	// Reason says why (one of the Reason constants; "" for success).
	Reason string
}

// DecideInput is what Decide needs about an attempt.
type DecideInput struct {
	Verdict Verdict
	// Attempt is the 1-based attempt that just failed; < 1 counts as 1.
	Attempt int
	// MaxAttempts is the run's attempt budget (first call + retries); < 1
	// counts as 1.
	MaxAttempts int
	// Backoff computes the wait before a retry.
	Backoff Backoff
	// MaxRetryAfter caps an honoured Retry-After; ≤ 0 means 60s. A backend
	// asking for longer is not retried within the run (the exhausted branch
	// applies instead: typically a restart minutes later).
	MaxRetryAfter time.Duration
}

// DefaultMaxRetryAfter is DecideInput.MaxRetryAfter's zero-value meaning.
const DefaultMaxRetryAfter = 60 * time.Second

// ambiguousClasses may be retried against their rule when the backend says
// x-should-retry: true. They describe the connection or the backend's state,
// which the backend knows better than our guess; classes about the request
// itself (quota, context length, invalid, unsupported, logic) never are.
var ambiguousClasses = map[Class]bool{
	NetworkTransient: true, NetworkPermanent: true, Timeout: true, ProviderError: true,
}

// Decide applies the table to one attempt's verdict:
//
//   - Class "" → succeed. canceled → requeue (no attempt used).
//   - x-should-retry: false → no retry within the run.
//   - x-should-retry: true → retry even a no-retry class, for network,
//     timeout and provider classes only.
//   - A retryable class with attempts left → retry after
//     Backoff.Delay(Attempt), or after the backend's Retry-After when that is
//     longer; a Retry-After above MaxRetryAfter ends the run instead.
//   - Otherwise the rule's Exhausted: restart, or dead_letter.
func (p Policy) Decide(in DecideInput) Decision {
	c := in.Verdict.Class
	switch c {
	case "":
		return Decision{Action: ActionSucceed}
	case Canceled:
		return Decision{Action: ActionRequeue, Class: Canceled, Reason: ReasonCanceled}
	}
	attempt, maxAttempts := max(in.Attempt, 1), max(in.MaxAttempts, 1)
	maxRA := in.MaxRetryAfter
	if maxRA <= 0 {
		maxRA = DefaultMaxRetryAfter
	}
	rule := p.Rule(c)

	retry, reason := rule.Retry, ReasonRetryable
	switch {
	case in.Verdict.ShouldRetry < 0:
		retry, reason = false, ReasonBackendSaidNoRetry
	case !retry && in.Verdict.ShouldRetry > 0 && ambiguousClasses[c]:
		retry, reason = true, ReasonBackendSaidRetry
	case !retry:
		reason = ReasonNotRetryable
	}
	ra := max(in.Verdict.RetryAfter, 0)
	if retry {
		switch {
		case attempt >= maxAttempts:
			reason = ReasonAttemptsExhausted
		case ra > maxRA:
			reason = ReasonRetryAfterTooLong
		default:
			return Decision{Action: ActionRetry, Delay: max(in.Backoff.Delay(attempt), ra), Class: c, Reason: reason}
		}
	}
	if rule.Exhausted == Restart {
		return Decision{Action: ActionRestart, Delay: ra, Class: c, Reason: reason}
	}
	return Decision{Action: ActionDeadLetter, Class: c, Reason: reason}
}
