package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestWaitingForBudget (#39): a task whose first attempt failed with a 500
// that used its tenant's whole budget is deferred by the budget on its
// retry. `inspector task --json` says waiting_for budget, which budget,
// and when the next attempt is due, and keeps the 500 as its error;
// `inspector task` leads with the wait and shows the 500 below it as the
// last error of attempt 1.
func TestWaitingForBudget(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	var calls atomic.Int32
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"upstream failed","type":"server_error"},"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`)
	}))
	t.Cleanup(be.Close)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 5, initial_backoff: 10ms, max_backoff: 10ms}
tenants:
  acme: {budget: {tokens: 100, per: 1h}}
agents:
  llm:
    http: {url: %q}
`, be.URL+"/v1/chat/completions"))
	ops := freeAddr(t)
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	ctx := context.Background()
	_, err := tasks.NewClient(srv.Client()).Enqueue(ctx, tasks.Task{ID: "held", Agent: "llm", Tenant: "acme"})
	require.NoError(t, err)
	st := tasks.NewStore(srv.Client())
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := st.Get(ctx, "held")
		require.NoError(t, err)
		if v.State == tasks.StateDeferred {
			break
		}
		require.True(t, time.Now().Before(deadline), "the task was not deferred: %s", v.State)
		time.Sleep(20 * time.Millisecond)
	}
	require.EqualValues(t, 1, calls.Load(), "the retry over the budget made no call")

	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "held", "--json")
	require.Equal(t, 0, code, errOut)
	var v tasks.View
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, tasks.WaitingBudget, v.WaitingFor, out)
	require.Regexp(t, `^budget "tenant acme" tokens 100/1h0m0s exhausted; room again at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, v.WaitingDetail)
	next, err := time.Parse(time.RFC3339Nano, v.NextAttemptAt)
	require.NoError(t, err, out)
	require.True(t, next.After(v.History[len(v.History)-1].At), "the next attempt is due after the deferral")
	require.Contains(t, v.Error, "500", "the JSON keeps the last attempt's error")
	require.Equal(t, 1, v.Attempts)
	require.Less(t, strings.Index(out, `"waiting_for"`), strings.Index(out, `"error"`), "the JSON leads with the wait")

	out, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "held")
	require.Equal(t, 0, code, errOut)
	waitAt := regexp.MustCompile(`\nWaiting for: +budget — budget "tenant acme" tokens 100/1h0m0s exhausted; room again at \S+\n`).FindStringIndex(out)
	require.NotNil(t, waitAt, out)
	require.Regexp(t, `\nNext attempt at: +`+regexp.QuoteMeta(v.NextAttemptAt)+`\n`, out)
	errAt := strings.Index(out, "Last error (attempt 1):")
	require.Positive(t, errAt, out)
	require.Less(t, waitAt[0], errAt, out)
	require.NotContains(t, out, "\nError:", out)
}
