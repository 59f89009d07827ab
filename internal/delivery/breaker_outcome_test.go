package delivery

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestBreakerOutcome: what a call tells its breaker. Caller errors and
// back-pressure are neither successes nor failures.
func TestBreakerOutcome(t *testing.T) {
	t.Parallel()
	retryAfter := &agent.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}
	bare429 := &agent.Reply{Status: http.StatusTooManyRequests, Header: http.Header{}}
	pol := resilience.DefaultPolicy()
	tests := []struct {
		name  string
		class resilience.Class
		reply *agent.Reply
		want  breaker.Outcome
	}{
		{"success", "", nil, breaker.OutcomeSuccess},
		{"provider error counts", resilience.ProviderError, nil, breaker.OutcomeFailure},
		{"network counts", resilience.NetworkTransient, nil, breaker.OutcomeFailure},
		{"invalid_request is the caller's", resilience.InvalidRequest, nil, breaker.OutcomeIgnore},
		{"context_length is the caller's", resilience.ContextLength, nil, breaker.OutcomeIgnore},
		{"canceled says nothing", resilience.Canceled, nil, breaker.OutcomeIgnore},
		{"429 with Retry-After is back-pressure", resilience.RateLimited, retryAfter, breaker.OutcomeIgnore},
		{"429 without a reset counts", resilience.RateLimited, bare429, breaker.OutcomeFailure},
		{"rate_limited without a reply counts", resilience.RateLimited, nil, breaker.OutcomeFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, breakerOutcome(pol, tt.class, tt.reply))
		})
	}
}

// TestPauseView: a pause-only key honours a fleet-wide pause set by
// another process within pauseCheckEvery, and its own at once, reading
// Redis at most once per pauseCheckEvery.
func TestPauseView(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	lim := limit.New(rdb)
	log := &taskLog{base: slog.New(slog.DiscardHandler), env: &tasks.Envelope{}}
	var v pauseView
	require.True(t, v.admit(ctx, log, lim, "k").Allowed)

	// Another process pauses the key: seen once this view's entry is stale.
	_, _, err := limit.New(rdb).Pause(ctx, "k", time.Minute, "test")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		a := v.admit(ctx, log, lim, "k")
		return !a.Allowed && a.Limit == limit.Paused && a.RetryIn > 50*time.Second
	}, 5*pauseCheckEvery, 10*time.Millisecond)

	// This process's own pause takes effect at once.
	var own pauseView
	require.True(t, own.admit(ctx, log, lim, "other").Allowed)
	own.paused("other", time.Minute)
	require.False(t, own.admit(ctx, log, lim, "other").Allowed)
}
