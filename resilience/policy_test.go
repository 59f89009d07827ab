package resilience

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noJitter makes Backoff.Delay exact: 100ms, 200ms, 400ms, … capped at 1s.
var noJitter = Backoff{Initial: 100 * time.Millisecond, Max: time.Second}

func TestDefaultPolicyIsDesignTable(t *testing.T) {
	t.Parallel()
	want := map[Class]Rule{
		NetworkTransient: {Retry: true, CountsForBreaker: true, Exhausted: Restart},
		Timeout:          {Retry: true, CountsForBreaker: true, Exhausted: Restart},
		RateLimited:      {Retry: true, CountsForBreaker: true, Exhausted: Restart, Fallback: true},
		ProviderError:    {Retry: true, CountsForBreaker: true, Exhausted: Restart, Fallback: true},
		QuotaExhausted:   {Retry: false, CountsForBreaker: true, Exhausted: DeadLetter, Fallback: true},
		NetworkPermanent: {Retry: false, CountsForBreaker: true, Exhausted: DeadLetter},
		ContextLength:    {Retry: false, CountsForBreaker: false, Exhausted: DeadLetter},
		InvalidRequest:   {Retry: false, CountsForBreaker: false, Exhausted: DeadLetter},
		NotSupported:     {Retry: false, CountsForBreaker: false, Exhausted: DeadLetter},
		LogicError:       {Retry: false, CountsForBreaker: false, Exhausted: DeadLetter},
		Canceled:         {},
	}
	p := DefaultPolicy()
	require.Equal(t, Policy(want), p)
	require.Len(t, p, len(Classes()))
	require.NoError(t, p.Validate())
}

// TestDecideEveryClass runs every class with attempts left and with attempts
// used up through the default table.
func TestDecideEveryClass(t *testing.T) {
	t.Parallel()
	type outcome struct {
		left, exhausted Action
		reasonLeft      string
		reasonExhausted string
	}
	retryThenRestart := outcome{ActionRetry, ActionRestart, ReasonRetryable, ReasonAttemptsExhausted}
	deadNow := outcome{ActionDeadLetter, ActionDeadLetter, ReasonNotRetryable, ReasonNotRetryable}
	want := map[Class]outcome{
		NetworkTransient: retryThenRestart,
		Timeout:          retryThenRestart,
		RateLimited:      retryThenRestart,
		ProviderError:    retryThenRestart,
		QuotaExhausted:   deadNow,
		NetworkPermanent: deadNow,
		ContextLength:    deadNow,
		InvalidRequest:   deadNow,
		NotSupported:     deadNow,
		LogicError:       deadNow,
		Canceled:         {ActionRequeue, ActionRequeue, ReasonCanceled, ReasonCanceled},
	}
	p := DefaultPolicy()
	for _, c := range Classes() {
		w, ok := want[c]
		require.True(t, ok, "class %s missing from the test table", c)
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			d := p.Decide(DecideInput{Verdict: Verdict{Class: c}, Attempt: 2, MaxAttempts: 3, Backoff: noJitter})
			require.Equal(t, w.left, d.Action)
			require.Equal(t, w.reasonLeft, d.Reason)
			require.Equal(t, c, d.Class)
			if d.Action == ActionRetry {
				require.Equal(t, 200*time.Millisecond, d.Delay, "Backoff.Delay(Attempt)")
			} else {
				require.Zero(t, d.Delay)
			}

			d = p.Decide(DecideInput{Verdict: Verdict{Class: c}, Attempt: 3, MaxAttempts: 3, Backoff: noJitter})
			require.Equal(t, w.exhausted, d.Action)
			require.Equal(t, w.reasonExhausted, d.Reason)
			require.Zero(t, d.Delay)
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	tests := []struct {
		name string
		p    Policy
		in   DecideInput
		want Decision
	}{
		{
			name: "success",
			in:   DecideInput{Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionSucceed},
		},
		{
			name: "canceled_on_last_attempt_still_requeues",
			in:   DecideInput{Verdict: Verdict{Class: Canceled, ShouldRetry: -1}, Attempt: 3, MaxAttempts: 3},
			want: Decision{Action: ActionRequeue, Class: Canceled, Reason: ReasonCanceled},
		},
		{
			name: "first_attempt_backoff",
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: Timeout, Reason: ReasonRetryable},
		},
		{
			name: "retry_after_longer_than_backoff_wins",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 20 * time.Second}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 20 * time.Second, Class: RateLimited, Reason: ReasonRetryable},
		},
		{
			name: "backoff_longer_than_retry_after_wins",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 50 * time.Millisecond}, Attempt: 4, MaxAttempts: 9, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 800 * time.Millisecond, Class: RateLimited, Reason: ReasonRetryable},
		},
		{
			name: "retry_after_on_any_class",
			in:   DecideInput{Verdict: Verdict{Class: ProviderError, RetryAfter: 5 * time.Second}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 5 * time.Second, Class: ProviderError, Reason: ReasonRetryable},
		},
		{
			name: "retry_after_exactly_cap_is_honoured",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: time.Minute}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: time.Minute, Class: RateLimited, Reason: ReasonRetryable},
		},
		{
			name: "retry_after_above_default_cap_restarts",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 61 * time.Second}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRestart, Delay: 61 * time.Second, Class: RateLimited, Reason: ReasonRetryAfterTooLong},
		},
		{
			name: "retry_after_above_custom_cap_restarts",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 3 * time.Second}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter, MaxRetryAfter: 2 * time.Second},
			want: Decision{Action: ActionRestart, Delay: 3 * time.Second, Class: RateLimited, Reason: ReasonRetryAfterTooLong},
		},
		{
			name: "retry_after_custom_cap_allows_longer",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 5 * time.Minute}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter, MaxRetryAfter: 10 * time.Minute},
			want: Decision{Action: ActionRetry, Delay: 5 * time.Minute, Class: RateLimited, Reason: ReasonRetryable},
		},
		{
			name: "retry_after_on_exhausted_restart_is_hint",
			in:   DecideInput{Verdict: Verdict{Class: RateLimited, RetryAfter: 7 * time.Second}, Attempt: 3, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRestart, Delay: 7 * time.Second, Class: RateLimited, Reason: ReasonAttemptsExhausted},
		},
		{
			name: "retry_after_on_dead_letter_ignored",
			in:   DecideInput{Verdict: Verdict{Class: QuotaExhausted, RetryAfter: 7 * time.Second}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionDeadLetter, Class: QuotaExhausted, Reason: ReasonNotRetryable},
		},
		{
			name: "negative_retry_after_ignored",
			in:   DecideInput{Verdict: Verdict{Class: Timeout, RetryAfter: -time.Hour}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: Timeout, Reason: ReasonRetryable},
		},
		{
			name: "backend_said_no_retry_restarts",
			in:   DecideInput{Verdict: Verdict{Class: ProviderError, ShouldRetry: -1}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRestart, Class: ProviderError, Reason: ReasonBackendSaidNoRetry},
		},
		{
			name: "backend_said_no_retry_on_dead_letter_class",
			in:   DecideInput{Verdict: Verdict{Class: InvalidRequest, ShouldRetry: -1}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: InvalidRequest, Reason: ReasonBackendSaidNoRetry},
		},
		{
			name: "backend_said_retry_network_permanent",
			in:   DecideInput{Verdict: Verdict{Class: NetworkPermanent, ShouldRetry: 1}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: NetworkPermanent, Reason: ReasonBackendSaidRetry},
		},
		{
			name: "backend_said_retry_but_no_attempts_left",
			in:   DecideInput{Verdict: Verdict{Class: NetworkPermanent, ShouldRetry: 1}, Attempt: 3, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionDeadLetter, Class: NetworkPermanent, Reason: ReasonAttemptsExhausted},
		},
		{
			name: "backend_said_retry_ignored_for_request_classes",
			in:   DecideInput{Verdict: Verdict{Class: InvalidRequest, ShouldRetry: 1}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: InvalidRequest, Reason: ReasonNotRetryable},
		},
		{
			name: "backend_said_retry_ignored_for_quota",
			in:   DecideInput{Verdict: Verdict{Class: QuotaExhausted, ShouldRetry: 1}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: QuotaExhausted, Reason: ReasonNotRetryable},
		},
		{
			name: "backend_said_retry_on_retryable_keeps_reason",
			in:   DecideInput{Verdict: Verdict{Class: Timeout, ShouldRetry: 1}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: Timeout, Reason: ReasonRetryable},
		},
		{
			name: "max_attempts_zero_means_one",
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 1, MaxAttempts: 0},
			want: Decision{Action: ActionRestart, Class: Timeout, Reason: ReasonAttemptsExhausted},
		},
		{
			name: "attempt_zero_means_one",
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 0, MaxAttempts: 2, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: Timeout, Reason: ReasonRetryable},
		},
		{
			name: "attempt_beyond_max",
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 9, MaxAttempts: 3},
			want: Decision{Action: ActionRestart, Class: Timeout, Reason: ReasonAttemptsExhausted},
		},
		{
			name: "unknown_class_uses_provider_error_rule",
			in:   DecideInput{Verdict: Verdict{Class: "gremlins"}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: "gremlins", Reason: ReasonRetryable},
		},
		{
			name: "unknown_class_follows_overridden_provider_error",
			p:    p.With(map[Class]Rule{ProviderError: {Retry: false, Exhausted: DeadLetter}}),
			in:   DecideInput{Verdict: Verdict{Class: "gremlins"}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: "gremlins", Reason: ReasonNotRetryable},
		},
		{
			name: "override_quota_to_restart",
			p:    p.With(map[Class]Rule{QuotaExhausted: {Retry: false, CountsForBreaker: true, Exhausted: Restart}}),
			in:   DecideInput{Verdict: Verdict{Class: QuotaExhausted}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionRestart, Class: QuotaExhausted, Reason: ReasonNotRetryable},
		},
		{
			name: "override_timeout_dead_letters_when_exhausted",
			p:    p.With(map[Class]Rule{Timeout: {Retry: true, CountsForBreaker: true, Exhausted: DeadLetter}}),
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 3, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: Timeout, Reason: ReasonAttemptsExhausted},
		},
		{
			name: "empty_exhausted_dead_letters",
			p:    Policy{Timeout: {Retry: false}},
			in:   DecideInput{Verdict: Verdict{Class: Timeout}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: Timeout, Reason: ReasonNotRetryable},
		},
		{
			name: "partial_policy_falls_back_to_default_row",
			p:    Policy{Timeout: {Retry: false}},
			in:   DecideInput{Verdict: Verdict{Class: RateLimited}, Attempt: 1, MaxAttempts: 3, Backoff: noJitter},
			want: Decision{Action: ActionRetry, Delay: 100 * time.Millisecond, Class: RateLimited, Reason: ReasonRetryable},
		},
		{
			name: "nil_policy_is_default",
			p:    nil,
			in:   DecideInput{Verdict: Verdict{Class: ContextLength}, Attempt: 1, MaxAttempts: 3},
			want: Decision{Action: ActionDeadLetter, Class: ContextLength, Reason: ReasonNotRetryable},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pol := tc.p
			if pol == nil && tc.name != "nil_policy_is_default" {
				pol = p
			}
			require.Equal(t, tc.want, pol.Decide(tc.in))
		})
	}
}

func TestDecideWithClassifier(t *testing.T) {
	t.Parallel()
	// End to end: a 429 with Retry-After, classified then decided.
	v := Classify(&Failure{Status: 429, Header: hdr("Retry-After", "2"), Text: "Too Many Requests"})
	d := DefaultPolicy().Decide(DecideInput{Verdict: v, Attempt: 1, MaxAttempts: 3, Backoff: noJitter})
	require.Equal(t, Decision{Action: ActionRetry, Delay: 2 * time.Second, Class: RateLimited, Reason: ReasonRetryable}, d)

	// The hard case: insufficient_quota is not retried and is dead-lettered.
	v = Classify(&Failure{Status: 429, Text: `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`})
	d = DefaultPolicy().Decide(DecideInput{Verdict: v, Attempt: 1, MaxAttempts: 3, Backoff: noJitter})
	require.Equal(t, ActionDeadLetter, d.Action)
	require.True(t, DefaultPolicy().CountsForBreaker(v.Class))
}

func TestPolicyRuleAndBreaker(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	require.Equal(t, p[ProviderError], p.Rule("nope"))
	require.Equal(t, p[Timeout], Policy(nil).Rule(Timeout))
	require.False(t, p.CountsForBreaker(""))
	require.False(t, p.CountsForBreaker(Canceled))
	require.False(t, p.CountsForBreaker(InvalidRequest))
	require.False(t, p.CountsForBreaker(ContextLength))
	require.True(t, p.CountsForBreaker(QuotaExhausted))
	require.True(t, p.CountsForBreaker(NetworkTransient))
	require.True(t, p.CountsForBreaker("unknown"))
}

func TestPolicyWithDoesNotMutate(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	q := p.With(map[Class]Rule{Timeout: {Exhausted: DeadLetter}})
	require.Equal(t, Rule{Retry: true, CountsForBreaker: true, Exhausted: Restart}, p[Timeout])
	require.Equal(t, Rule{Exhausted: DeadLetter}, q[Timeout])
	require.Len(t, q, len(p))
	require.Equal(t, DefaultPolicy(), Policy(nil).With(nil))
	// DefaultPolicy hands out fresh maps.
	p[Timeout] = Rule{}
	require.Equal(t, Rule{Retry: true, CountsForBreaker: true, Exhausted: Restart}, DefaultPolicy()[Timeout])
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	err := Policy{"bogus": {}}.Validate()
	require.ErrorIs(t, err, ErrInvalidPolicy)
	require.Contains(t, err.Error(), "bogus")
	err = Policy{Timeout: {Exhausted: "later"}}.Validate()
	require.True(t, errors.Is(err, ErrInvalidPolicy))
	require.Contains(t, err.Error(), fmt.Sprintf("%q", "later"))
	require.NoError(t, Policy{Timeout: {Exhausted: Restart}, LogicError: {}}.Validate())
}

// TestFallsBack: the default fallback column, and overrides.
func TestFallsBack(t *testing.T) {
	t.Parallel()
	yes := map[Class]bool{ProviderError: true, RateLimited: true, QuotaExhausted: true}
	p := DefaultPolicy()
	for _, c := range Classes() {
		require.Equal(t, yes[c], p.FallsBack(c), c)
	}
	require.False(t, p.FallsBack(""), "success never falls back")
	require.True(t, p.FallsBack(Class("something_new")), "an unknown class is treated as provider_error")
	q := p.With(map[Class]Rule{Timeout: {Retry: true, CountsForBreaker: true, Exhausted: Restart, Fallback: true},
		ProviderError: {Retry: true, CountsForBreaker: true, Exhausted: Restart}})
	require.True(t, q.FallsBack(Timeout))
	require.False(t, q.FallsBack(ProviderError))
	require.False(t, q.FallsBack(Canceled))
	require.True(t, p.FallsBack(RateLimited), "With does not modify its receiver")
}
