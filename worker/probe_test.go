package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/tasks"
)

// TestProbeIsTheTrial: while its breaker is open, an agent with a probe
// gets no real task, not even as a half-open trial; failed probes reopen
// the breaker; a healthy probe closes it and the deferred tasks run.
func TestProbeIsTheTrial(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var probes atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		probes.Add(1)
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hs.Close)
	cs := &calls{}
	w, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 2s}
agents:
  p:
    circuit_breaker: {failure_threshold: 1, cooldown: 300ms, half_open_max_calls: 5}
    health: {url: %q, interval: 100ms, timeout: 1s}
`, hs.URL+"/healthz"), WithAgent("p", fixedAgent(cs, nil)))
	ctx := context.Background()
	require.NoError(t, w.breakers.Trip(ctx, "p", 300*time.Millisecond))
	ids := enqueueN(t, rdb, "p", 4)

	// Several cooldowns end while the probe fails: each time the probe is
	// the trial and reopens the breaker; no task reaches the agent.
	deadline := time.Now().Add(20 * time.Second)
	for counterValue(t, w, "agentq_probe_total", map[string]string{"agent": "p", "result": "fail"}) < 3 {
		require.True(t, time.Now().Before(deadline), "probes did not fail 3 times")
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, cs.all(), "no real task while the breaker is not closed")
	s, err := w.breakers.Get(ctx, "p")
	require.NoError(t, err)
	require.NotEqual(t, breaker.StateClosed, s.State)
	st, ok, err := w.breakers.ProbeStatus(ctx, "p")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, st.LastOK)
	require.Contains(t, st.Error, "status 503")

	up.Store(true)
	views := waitTerminal(t, rdb, ids, 20*time.Second)
	for id, v := range views {
		require.Equal(t, tasks.StateSucceeded, v.State, id)
		require.Equal(t, 1, v.Attempts, id)
	}
	s, err = w.breakers.Get(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, s.State)
	st, _, err = w.breakers.ProbeStatus(ctx, "p")
	require.NoError(t, err)
	require.True(t, st.LastOK)
	require.Greater(t, st.SuccessRate, 0.0)
}

// TestProbeWhileClosed: interval probes run once per interval for the
// whole cluster, and a failing probe does not open a closed breaker.
func TestProbeWhileClosed(t *testing.T) {
	t.Parallel()
	var probes atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		probes.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(hs.Close)
	yaml := fmt.Sprintf(`
worker: {shutdown_timeout: 2s}
agents:
  p:
    circuit_breaker: {failure_threshold: 1}
    health: {url: %q, interval: 400ms}
`, hs.URL)
	w, _ := runWorker(t, yaml, WithAgent("p", fixedAgent(&calls{}, nil)))
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for probes.Load() < 4 {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	require.GreaterOrEqual(t, elapsed, 3*400*time.Millisecond-100*time.Millisecond, "at most one probe per interval")
	s, err := w.breakers.Get(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, s.State, "interval probes do not open the breaker")
	require.Zero(t, s.FailureCount)
}
