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

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestConfiguredClassifierRules: the worker classifies with the config's
// classifier.rules first. A real HTTP agent on a loopback server answers
// 500 "quota for team X is gone" — built-in, a retryable provider_error —
// and the rule makes it quota_exhausted: one call, then a dead letter of
// that class. A 500 the rule does not match keeps the built-in class, and
// a real exec agent killed by SIGKILL is matched by exit_code 137.
func TestConfiguredClassifierRules(t *testing.T) {
	t.Parallel()
	var quotaCalls, otherCalls atomic.Int32
	quota := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		quotaCalls.Add(1)
		http.Error(w, `{"error":{"message":"quota for team X is gone"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(quota.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		otherCalls.Add(1)
		http.Error(w, `{"error":{"message":"quota for team X is fine, the database is not"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(other.Close)

	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 0}
  circuit_breaker: {failure_threshold: 100}
classifier:
  rules:
    - name: team quota
      class: quota_exhausted
      status: 500
      regexp: 'quota for team \w+ is gone'
    - name: killed            # any class the built-in table would not give
      class: not_supported
      exit_code: 137
agents:
  quota: {http: {url: %q}}
  other: {http: {url: %q}}
  killed:
    exec: {command: [sh, -c, 'echo dying >&2; kill -9 $$'], env: [PATH]}
`, quota.URL, other.URL))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	for _, a := range []string{"quota", "other", "killed"} {
		_, err := c.Enqueue(ctx, tasks.Task{ID: a + "-task", Agent: a})
		require.NoError(t, err)
	}
	dlq := deadletter.NewStore(rdb)
	for _, tc := range []struct {
		id       string
		class    resilience.Class
		reason   string
		attempts int
	}{
		{"quota-task", resilience.QuotaExhausted, resilience.ReasonNotRetryable, 1},
		{"other-task", resilience.ProviderError, deadletter.ReasonRestartNotEnabled, 3}, // restartable, but max_restarts: 0
		{"killed-task", resilience.NotSupported, resilience.ReasonNotRetryable, 1},
	} {
		v := waitState(t, rdb, tc.id, 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateDeadLettered, v.State, tc.id)
		require.Equal(t, string(tc.class), v.ErrorClass, tc.id)
		require.Equal(t, tc.attempts, v.Attempts, tc.id)
		e, err := dlq.Get(ctx, tc.id)
		require.NoError(t, err)
		require.Equal(t, string(tc.class), e.ErrorClass, tc.id)
		require.Equal(t, tc.reason, e.Reason, tc.id)
	}
	require.EqualValues(t, 1, quotaCalls.Load(), "quota_exhausted is not retried")
	require.EqualValues(t, 3, otherCalls.Load(), "an unmatched 500 keeps the built-in provider_error")
}

// TestWorkerRefusesBadClassifierRules: a Config built in Go with a bad
// rule is refused by New with the field named.
func TestWorkerRefusesBadClassifierRules(t *testing.T) {
	t.Parallel()
	cfgErr := func() error {
		_, err := New(badRulesConfig(), nil)
		return err
	}()
	require.ErrorContains(t, cfgErr, "classifier.rules[0].regexp")
}

func badRulesConfig() *config.Config {
	c := config.Default()
	c.Classifier.Rules = []config.ClassifierRule{{Class: resilience.Timeout, Regexp: "("}}
	return c
}
