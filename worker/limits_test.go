package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/tasks"
)

func enqueueOne(t *testing.T, c *tasks.Client, id, agentName string) string {
	t.Helper()
	res, err := c.Enqueue(context.Background(), tasks.Task{ID: id, Agent: agentName, Params: json.RawMessage(`{}`)})
	require.NoError(t, err)
	return res.ID
}

// lastEvent returns the last history event of v named name.
func lastEvent(v *tasks.View, name string) *tasks.Event {
	for i := len(v.History) - 1; i >= 0; i-- {
		if string(v.History[i].Event) == name {
			return &v.History[i]
		}
	}
	return nil
}

// TestLimitTokensDefer: tokens are debited from the reply's usage (a Go
// agent reports an ActionResponse-style usage through ObserveReply); once
// the window's tokens reach the limit the next task's call is not made: it
// is deferred without using an attempt, its history names the limit, and
// the metric counts it.
func TestLimitTokensDefer(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	llm := agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		n.Add(1)
		agent.ObserveReply(ctx, agent.Reply{Usage: json.RawMessage(`{"input_tokens":40,"output_tokens":20}`)})
		return json.RawMessage(`{"ok":true}`), nil
	})
	w, rdb := runWorker(t, `
agents:
  llm:
    limits: {key: tok, tokens: 100, per: 30s}
`, WithAgent("llm", llm))
	c := tasks.NewClient(rdb)
	for i := range 2 {
		id := enqueueOne(t, c, fmt.Sprintf("tok-%d", i), "llm")
		v := waitTerminal(t, rdb, []string{id}, 10*time.Second)[id]
		require.Equal(t, tasks.StateSucceeded, v.State)
	}
	st, err := limit.New(rdb).Status(context.Background(), "tok")
	require.NoError(t, err)
	require.EqualValues(t, 120, st.TokensInWindow, "60 tokens debited per call")

	id := enqueueOne(t, c, "tok-2", "llm")
	v := waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeferred })
	require.Zero(t, v.Attempts, "a limit's deferral uses no attempt")
	ev := lastEvent(v, "deferred")
	require.NotNil(t, ev)
	require.Contains(t, ev.Error, `limit "tok" tokens 100/30s`)
	require.EqualValues(t, 2, n.Load(), "the call over the limit was not made")
	require.EqualValues(t, 1, counterValue(t, w, "agentq_limit_deferrals_total", map[string]string{"key": "tok", "limit": "tokens"}))
}

// TestLimitProviderPause: a 429 with Retry-After from an HTTP agent with
// limits pauses its key in Redis; the next task is deferred naming the
// pause, without calling the backend.
func TestLimitProviderPause(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	be := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			rw.Header().Set("Retry-After", "30")
			rw.WriteHeader(http.StatusTooManyRequests)
			_, _ = rw.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests"}}`))
			return
		}
		_, _ = rw.Write([]byte(`{}`))
	}))
	t.Cleanup(be.Close)
	_, rdb := runWorker(t, fmt.Sprintf(`
agents:
  llm:
    http: {url: %q}
    retry: {max_attempts: 1}
    restart: {max_restarts: 0}
    limits: {concurrency: 4}
`, be.URL))
	c := tasks.NewClient(rdb)
	first := enqueueOne(t, c, "p-0", "llm")
	waitTerminal(t, rdb, []string{first}, 10*time.Second)
	st, err := limit.New(rdb).Status(context.Background(), "llm")
	require.NoError(t, err)
	require.NotNil(t, st.PausedUntil)
	require.Greater(t, time.Until(*st.PausedUntil), 20*time.Second)
	require.Contains(t, st.PauseReason, "429")
	require.Zero(t, st.InFlight, "the lease was released")

	id := enqueueOne(t, c, "p-1", "llm")
	v := waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeferred })
	ev := lastEvent(v, "deferred")
	require.NotNil(t, ev)
	require.True(t, strings.HasPrefix(ev.Error, `limit "llm" paused by the provider until`), ev.Error)
	require.EqualValues(t, 1, calls.Load())
}

// TestLimitFallback: a primary over its limit (here paused) sends the call
// at once to a fallback agent whose breaker and limits admit it.
func TestLimitFallback(t *testing.T) {
	t.Parallel()
	var primary, backup calls
	w, rdb := runWorker(t, `
agents:
  llm:
    fallback: [backup]
    limits: {key: prov, requests: 100, per: 1m}
  backup: {}
`, WithAgent("llm", fixedAgent(&primary, nil)), WithAgent("backup", fixedAgent(&backup, nil)))
	_, _, err := limit.New(rdb).Pause(context.Background(), "prov", time.Minute, "test")
	require.NoError(t, err)
	id := enqueueOne(t, tasks.NewClient(rdb), "fb-0", "llm")
	v := waitTerminal(t, rdb, []string{id}, 10*time.Second)[id]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Empty(t, primary.all(), "the primary over its limit was not called")
	require.Len(t, backup.all(), 1)
	require.EqualValues(t, 1, counterValue(t, w, "agentq_fallbacks_total", map[string]string{"agent": "llm", "fallback": "backup", "class": "over_limit"}))
}
