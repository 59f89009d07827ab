package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// get fetches url with an optional Authorization header value.
func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// scrape reads a Prometheus text exposition into series → value, where a
// series is written name{label="value",…} with its labels sorted by name
// (name alone when it has none).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	code, body := get(t, url, "")
	require.Equal(t, http.StatusOK, code)
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[normSeries(t, line[:i])] = v
	}
	return out
}

// normSeries sorts the labels of name{a="x",b="y"} (values without commas
// or escaped quotes, as ours are).
func normSeries(t *testing.T, s string) string {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return s
	}
	require.True(t, strings.HasSuffix(s, "}"), s)
	labels := strings.Split(s[open+1:len(s)-1], ",")
	sort.Strings(labels)
	return s[:open] + "{" + strings.Join(labels, ",") + "}"
}

// TestWorkerOpsEndpoints: a worker process's ops endpoints. /healthz and
// /readyz answer 200; /metrics counters move as tasks succeed, retry and
// are dead-lettered; /api/v1/agents requires the bearer token from
// AGENTQ_API_TOKEN and shows each agent's health; /readyz turns 503 while
// Redis is down and 200 again once it is back, the process staying alive.
func TestWorkerOpsEndpoints(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	state := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms}
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, b.agent))
	ops := freeAddr(t)
	base := "http://" + ops
	w := startEnv(t, "worker", []string{"AGENTQ_API_TOKEN=s3cret"}, b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, base+"/readyz", 20*time.Second)

	code, body := get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
	code, body = get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ready"}`, body)

	const (
		okAttempts   = `agentq_attempts_total{agent="tool",class="",outcome="success"}`
		netFailures  = `agentq_attempts_total{agent="tool",class="network_transient",outcome="failure"}`
		logicFailure = `agentq_attempts_total{agent="tool",class="logic_error",outcome="failure"}`
		durCount     = `agentq_attempt_duration_seconds_count{agent="tool"}`
		retries      = `agentq_retries_total{agent="tool",class="network_transient"}`
		deadLetters  = `agentq_dead_letters_total{agent="tool",class="logic_error",reason="not_retryable"}`
		breakerState = `agentq_breaker_state{key="tool",state="closed"}`
	)
	before := scrape(t, base+"/metrics")
	for _, s := range []string{okAttempts, netFailures, logicFailure, durCount, retries, deadLetters, breakerState} {
		require.Zero(t, before[s], s)
	}
	require.Contains(t, before, "go_goroutines", "the standard Go collector is registered")

	lines := []string{
		`{"id":"ops-ok","agent":"tool","params":{"mode":"echo"}}`,
		fmt.Sprintf(`{"id":"ops-flaky","agent":"tool","params":{"mode":"fail_then_succeed","times":1,"state_dir":%q}}`, state),
		`{"id":"ops-dead","agent":"tool","params":{"mode":"garbage"}}`,
	}
	_, errOut, ec := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, ec, errOut)
	views := waitStates(t, rdb, []string{"ops-ok", "ops-flaky", "ops-dead"}, 30*time.Second)
	require.Equal(t, tasks.StateSucceeded, views["ops-ok"].State)
	require.Equal(t, tasks.StateSucceeded, views["ops-flaky"].State)
	require.Equal(t, tasks.StateDeadLettered, views["ops-dead"].State)

	after := scrape(t, base+"/metrics")
	for _, tc := range []struct {
		series string
		delta  float64
	}{
		{okAttempts, 2},   // ops-ok, and ops-flaky's second attempt
		{netFailures, 1},  // ops-flaky's first attempt (connection reset)
		{logicFailure, 1}, // ops-dead
		{durCount, 4},
		{retries, 1},
		{deadLetters, 1},
	} {
		require.Equal(t, tc.delta, after[tc.series]-before[tc.series], tc.series)
	}
	require.Contains(t, after, breakerState, "the worker exports the state of the breaker it gated on")
	require.Equal(t, 1.0, after[breakerState], "closed")
	require.Zero(t, after[`agentq_breaker_state{key="tool",state="open"}`], "not open")

	// /api/v1/agents: the bearer token is required.
	agents := base + "/api/v1/agents"
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0", "s3cret", "Bearer s3cre", "Bearer s3cret2"} {
		code, body = get(t, agents, auth)
		require.Equal(t, http.StatusUnauthorized, code, "Authorization %q", auth)
		var e struct {
			Code string `json:"code"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &e), body)
		require.Equal(t, "unauthorized", e.Code)
	}
	code, body = get(t, agents, "Bearer s3cret")
	require.Equal(t, http.StatusOK, code, body)
	var resp struct {
		Agents []map[string]any `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp), body)
	require.Len(t, resp.Agents, 1)
	a := resp.Agents[0]
	require.Equal(t, "tool", a["agent"])
	require.Equal(t, "tool", a["key"])
	require.Equal(t, "closed", a["state"])
	// The connection reset is a failure within the rate window (30s): a
	// closed breaker with recent failures is degraded, not healthy.
	require.Equal(t, "degraded", a["health"], body)
	require.EqualValues(t, 1, a["window_failures"], body)
	require.EqualValues(t, 0, a["consecutive_failures"])
	require.EqualValues(t, 1, a["failure_count"], "the connection reset counted against the breaker; logic_error does not")
	for _, f := range []string{"success_count", "open_until", "last_failure_at", "last_success_at"} {
		require.Contains(t, a, f)
	}
	require.NotNil(t, a["last_failure_at"])
	require.Nil(t, a["open_until"])

	// Redis goes away: /readyz says 503 (within its 1s PING bound), /healthz
	// stays 200; Redis comes back: /readyz is 200 again, same process.
	srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body = get(t, base+"/readyz", "")
		if code == http.StatusServiceUnavailable {
			break
		}
		require.True(t, time.Now().Before(deadline), "/readyz still %d with Redis stopped: %s", code, body)
		time.Sleep(50 * time.Millisecond)
	}
	require.Contains(t, body, "redis unavailable")
	require.NotContains(t, body, srv.Addr, "no raw Redis error on an unauthenticated endpoint")
	code, _ = get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, code)

	srv.Restart()
	waitHTTP(t, base+"/readyz", 15*time.Second)
	select {
	case <-w.done:
		t.Fatalf("worker exited while Redis was down: %v", w.err)
	default:
	}
	// And it still runs tasks.
	_, errOut, ec = run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "tool", "--id", "ops-after", "--params", `{"mode":"echo"}`)
	require.Equal(t, 0, ec, errOut)
	views = waitStates(t, rdb, []string{"ops-after"}, 30*time.Second)
	require.Equal(t, tasks.StateSucceeded, views["ops-after"].State)
	require.Equal(t, 0, w.stop(t, 15*time.Second))
}
