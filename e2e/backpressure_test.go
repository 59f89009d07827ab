package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestExecAgentBackPressure (issue 38): an exec agent passes its
// provider's back-pressure on in its ActionResponse, and a real worker
// honours it as it honours an HTTP agent's Retry-After and rate-limit
// headers. Each case's agent (a real subprocess) fails its first call with
// a 429 ActionResponse, then succeeds:
//
//   - retry_after 1.5, and a retry-after-ms header 1500: the retry is
//     decided 1.5 s later (its history event's delay_ms, not a clock),
//     the task succeeds in 2 attempts, and the 429 is back-pressure: it
//     paused the agent's key fleet-wide (agentq_limit_pauses_total) and
//     the breaker counted no failure;
//   - OpenAI's x-ratelimit-remaining-requests 0 with
//     x-ratelimit-reset-requests: the key is paused;
//   - retry_after 2 above the agent's max_retry_after (1 s): no retry
//     within the run (DecideInput.MaxRetryAfter): the run ends and the
//     task restarts no sooner than the backend asked (delay_ms 2000),
//     then succeeds.
func TestExecAgentBackPressure(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	state := t.TempDir()
	exec := fmt.Sprintf(`{command: [%q], env: [PATH]}`, b.agent)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 100ms, jitter: 0.1}
  restart: {max_restarts: 2, delays: [100ms]}
agents:
  ra_number: {exec: %[1]s}
  ra_ms: {exec: %[1]s}
  ra_reset: {exec: %[1]s}
  ra_capped:
    exec: %[1]s
    retry: {max_retry_after: 1s}
`, exec))
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	replies := map[string]string{
		"ra_number": `{"status":"error","error":"rate limited","code":429,"retry_after":1.5}`,
		"ra_ms":     `{"status":"error","error":"rate limited","code":429,"headers":{"retry-after-ms":"1500","authorization":"Bearer sk-test"}}`,
		"ra_reset": `{"status":"error","error":"rate limited","code":429,"headers":` +
			`{"x-ratelimit-remaining-requests":"0","x-ratelimit-reset-requests":"1s"}}`,
		"ra_capped": `{"status":"error","error":"rate limited","code":429,"retry_after":2}`,
	}
	var lines, ids []string
	for _, name := range []string{"ra_number", "ra_ms", "ra_reset", "ra_capped"} {
		params, err := json.Marshal(map[string]any{
			"mode": "fail_then_succeed", "times": 1, "state_dir": state, "reply": json.RawMessage(replies[name]),
		})
		require.NoError(t, err)
		id := strings.ReplaceAll(name, "_", "-")
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":%q,"params":%s}`, id, name, params))
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, strings.Fields(out))

	views := waitStates(t, rdb, ids, 60*time.Second)
	for _, id := range ids {
		v := views[id]
		require.Equal(t, tasks.StateSucceeded, v.State, "%s: %v", id, eventNames(v.History))
		require.Equal(t, 2, v.Attempts, id)
	}

	// Retried within the run, after the delay the agent passed on.
	for _, id := range []string{"ra-number", "ra-ms", "ra-reset"} {
		v := views[id]
		require.Zero(t, v.Restarts, id)
		retries := eventsOf(v.History, tasks.EventRetrying)
		require.Len(t, retries, 1, "%s: %v", id, eventNames(v.History))
		require.Equal(t, "rate_limited", retries[0].ErrorClass, id)
		if id == "ra-reset" {
			continue // a reset pauses the key; the retry itself waits its backoff
		}
		require.GreaterOrEqual(t, retries[0].DelayMS, int64(1500), "%s: the retry is decided after the backend's retry_after", id)
		require.Less(t, retries[0].DelayMS, int64(2000), id)
	}

	// Above max_retry_after: the run ends, the restart waits as asked.
	capped := views["ra-capped"]
	require.Empty(t, eventsOf(capped.History, tasks.EventRetrying), "%v", eventNames(capped.History))
	restarting := eventsOf(capped.History, tasks.EventRestarting)
	require.Len(t, restarting, 1, "%v", eventNames(capped.History))
	require.Equal(t, "rate_limited", restarting[0].ErrorClass)
	require.GreaterOrEqual(t, restarting[0].DelayMS, int64(2000), "the restart is due no sooner than the retry_after")
	require.Equal(t, 1, capped.Restarts)

	// Back-pressure, as an HTTP agent's: each 429 paused its agent's key
	// fleet-wide, and no breaker counted it as a failure.
	resp, err := http.Get("http://" + ops + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, key := range []string{"ra_number", "ra_ms", "ra_reset", "ra_capped"} {
		require.Contains(t, string(metrics), fmt.Sprintf(`agentq_limit_pauses_total{key=%q} 1`, key))
		snap, err := breaker.New(rdb).Get(t.Context(), key)
		require.NoError(t, err)
		require.Zero(t, snap.FailureCount, "%s: back-pressure is not a breaker failure", key)
	}
	require.Equal(t, 0, w.stop(t, 15*time.Second))
}
