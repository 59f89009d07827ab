package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestAsynqDeadlineIsATimeout (#11 item 2): a delivery whose asynq
// deadline comes before the agent's own timeout (a task enqueued with
// asynq's 30-minute default, here 2s) times out as an attempt — class
// timeout, counted — instead of being taken for a shutdown, put back
// without an attempt and cut again forever.
func TestAsynqDeadlineIsATimeout(t *testing.T) {
	t.Parallel()
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 2h
  retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 0}
agents:
  coder: {}
`, WithAgent("coder", agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		<-ctx.Done() // a call far longer than the delivery's deadline
		return nil, ctx.Err()
	})))
	env := &tasks.Envelope{ID: "long-call", Agent: "coder", Queue: tasks.DefaultQueue, EnqueuedAt: time.Now().UTC()}
	payload, err := tasks.Encode(env)
	require.NoError(t, err)
	aq := asynq.NewClientFromRedisClient(rdb)
	_, err = aq.Enqueue(asynq.NewTask(tasks.TypeName, payload), asynq.TaskID(env.ID), asynq.MaxRetry(1<<30), asynq.Timeout(2*time.Second))
	require.NoError(t, err)

	v := waitState(t, rdb, env.ID, 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, string(resilience.Timeout), v.ErrorClass)
	require.Equal(t, 2, v.Attempts, "each cut call is an attempt")
	for _, ev := range v.History {
		require.NotEqual(t, tasks.EventInterrupted, ev.Event, "a deadline is not a shutdown")
	}
}

// TestRunTimeout (#11 item 2): every run agentq enqueues carries asynq's
// timeout tasks.RunTimeout, not asynq's 30-minute default, so a 2h agent
// call is never cut by asynq.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	_, rdb := runWorker(t, "worker: {concurrency: 1, shutdown_timeout: 2s}\nagents:\n  tool: {}\n",
		WithAgent("tool", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "later", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, []tasks.Task{{ID: "later-many", Agent: "tool"}}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, id := range []string{"later", "later-many"} {
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		require.NoError(t, err)
		require.Equal(t, tasks.RunTimeout, info.Timeout, id)
	}
}

// TestRestartRunFreesItsSlot (#11 item 4): every way a restart run ends
// frees its slot in the restart index, not only passing the breaker
// gate: a run for an agent no worker knows, and a run whose payload
// cannot be decoded, are dead-lettered and leave the index.
func TestRestartRunFreesItsSlot(t *testing.T) {
	t.Parallel()
	_, rdb := runWorker(t, "worker: {concurrency: 2, shutdown_timeout: 2s}\nagents:\n  tool: {}\n",
		WithAgent("tool", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	for _, id := range []string{"ghost", "garbled"} {
		require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: id}).Err())
	}
	// Restart 1 of a task whose agent is unknown here.
	require.NoError(t, c.EnqueueRun(ctx, &tasks.Envelope{ID: "ghost", Agent: "ghost", Queue: tasks.DefaultQueue, Run: 1, Restarts: 1}, 0))
	// Restart 1 of a task whose payload is not an envelope.
	aq := asynq.NewClientFromRedisClient(rdb)
	_, err := aq.Enqueue(asynq.NewTask(tasks.TypeName, []byte(`{"id":"garbled","agent":`)), asynq.TaskID("garbled#1"), asynq.MaxRetry(1<<30))
	require.NoError(t, err)

	dlq := deadletter.NewStore(rdb)
	for _, id := range []string{"ghost", "garbled#1"} {
		require.Eventually(t, func() bool { _, err := dlq.Get(ctx, id); return err == nil }, 20*time.Second, 10*time.Millisecond, id)
	}
	n, err := rdb.ZCard(ctx, rkeys.RestartPending()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "both restart slots are free")
}

// TestRestartHonoursRetryAfter (#11 item 16): a run that ends rate-limited
// with a Retry-After longer than the next restart delay (here 300s
// against 1s) is restarted no sooner than the backend asked.
func TestRestartHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "300")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"type":"rate_limit_error","message":"Too many requests"}}`))
	}))
	t.Cleanup(backend.Close)
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
  restart: {max_restarts: 3, delays: [1s]}
agents:
  llm:
    http: {url: %q}
`, backend.URL))
	ctx := context.Background()
	_, err := tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "limited", Agent: "llm"})
	require.NoError(t, err)
	before := time.Now()
	v := waitState(t, rdb, "limited", 20*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateRestarting })
	require.Equal(t, string(resilience.RateLimited), v.ErrorClass)
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventRestarting, last.Event)
	require.GreaterOrEqual(t, last.DelayMS, int64(300_000), "the restart waits for the Retry-After")
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(tasks.DefaultQueue, "limited#1")
	require.NoError(t, err)
	require.False(t, info.NextProcessAt.Before(before.Add(299*time.Second)), "restart 1 due at %s", info.NextProcessAt)
}
