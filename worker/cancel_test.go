package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// asynqGone waits until asynq holds no task aid on the default queue.
func asynqGone(t *testing.T, rdb redis.UniversalClient, aid string, d time.Duration) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(d)
	for {
		_, err := insp.GetTaskInfo(tasks.DefaultQueue, aid)
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return
		}
		require.True(t, time.Now().Before(deadline), "asynq still holds %s after %s (err %v)", aid, d, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCancelRunningTask: Client.Cancel of a running task reaches the
// worker through asynq's cancel channel and ends the agent's context; the
// task ends canceled (not put back, retried, restarted or dead-lettered),
// the breaker counts nothing, and the run is neither called again nor left
// in asynq.
func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	started := make(chan struct{}, 4)
	stopped := make(chan time.Time, 4)
	w, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
  circuit_breaker: {failure_threshold: 1, cooldown: 1h}
agents:
  slow: {}
`, WithAgent("slow", agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		calls.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		stopped <- time.Now()
		return nil, ctx.Err()
	})))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "run-away", Agent: "slow"})
	require.NoError(t, err)
	<-started
	waitState(t, rdb, "run-away", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateActive })

	res, err := c.Cancel(ctx, "run-away", "operator said so")
	require.NoError(t, err)
	require.Equal(t, tasks.StateActive, res.PreviousState)
	require.True(t, res.Stopping)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's context did not end after the cancel")
	}

	asynqGone(t, rdb, "run-away", 10*time.Second)
	v, err := c.Store().Get(ctx, "run-away")
	require.NoError(t, err)
	require.Equal(t, tasks.StateCanceled, v.State)
	require.Equal(t, "operator said so", v.CancelReason)
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventTaskCanceled, last.Event, "nothing is recorded after the cancel: %v", eventsOf(v))
	require.Equal(t, int32(1), calls.Load())
	require.Zero(t, counterValue(t, w, "agentq_retries_total", nil))
	require.Zero(t, counterValue(t, w, "agentq_dead_letters_total", nil))
	st, err := breaker.New(rdb).Get(ctx, "slow")
	require.NoError(t, err)
	require.Zero(t, st.ConsecutiveFailures, "a cancel is not a failure")
	require.Equal(t, breaker.StateClosed, st.State)
}

// TestCancelRaces: a cancel whose mark lands at awkward moments of a
// delivery, without its stop message (the record is marked directly,
// as a cancel racing the worker's dequeue would leave it). Each time the
// task ends canceled and nothing follows: no retry, restart or dead letter.
func TestCancelRaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error // what the agent returns after the mark
	}{
		{"before a retry is recorded", &resilience.Failure{Class: resilience.ProviderError, Text: "boom"}},
		{"before a restart is recorded", &resilience.Failure{Class: resilience.Timeout, Text: "slow"}},
		{"before a dead letter is recorded", &resilience.Failure{Class: resilience.InvalidRequest, Text: "bad"}},
		{"before a success is recorded", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			var rdb redis.UniversalClient
			attempts := "3"
			if tc.name == "before a restart is recorded" {
				attempts = "1"
			}
			_, rdb = runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: `+attempts+`, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 2, delays: [100ms]}
agents:
  tool: {}
`, WithAgent("tool", agent.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
				calls.Add(1)
				time.Sleep(200 * time.Millisecond) // twice the delivery's beginGrace: the start is in the record
				if err := rdb.HSet(context.WithoutCancel(ctx), rkeys.Task(r.TaskID), "state", "canceled").Err(); err != nil {
					return nil, err
				}
				return json.RawMessage(`{}`), tc.err
			})))
			c := tasks.NewClient(rdb)
			ctx := context.Background()
			_, err := c.Enqueue(ctx, tasks.Task{ID: "t", Agent: "tool"})
			require.NoError(t, err)
			asynqGone(t, rdb, "t", 10*time.Second)
			asynqGone(t, rdb, "t#1", time.Second)
			time.Sleep(300 * time.Millisecond) // past any retry or restart delay
			asynqGone(t, rdb, "t#1", time.Second)
			require.Equal(t, int32(1), calls.Load(), "the agent ran once")
			v, err := c.Store().Get(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, tasks.StateCanceled, v.State, eventsOf(v))
			for _, ev := range v.History {
				require.NotContains(t, []string{tasks.EventRetrying, tasks.EventRestarting, tasks.EventDeadLettered, tasks.EventSucceeded}, ev.Event)
			}
			_, err = deadletter.NewStore(rdb).Get(ctx, "t")
			require.ErrorIs(t, err, deadletter.ErrNotFound, "a canceled task is not dead-lettered")
			n, err := rdb.ZCard(ctx, rkeys.RestartPending()).Result()
			require.NoError(t, err)
			require.Zero(t, n, "no restart slot is held")
		})
	}
}

// TestCancelMarkStopsUnstoppedDelivery: a first delivery of a canceled task
// (its cancel came as it was dequeued and its stop message was missed) has
// its agent stopped when its deferred start finds the mark; a later run (a
// restart) of a canceled task never calls its agent.
func TestCancelMarkStopsUnstoppedDelivery(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	stopped := make(chan struct{}, 4)
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
agents:
  slow: {}
`, WithAgent("slow", agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		calls.Add(1)
		<-ctx.Done()
		stopped <- struct{}{}
		return nil, ctx.Err()
	})))
	ctx := context.Background()
	st := record.NewStore(rdb)
	c := tasks.NewClient(rdb)
	env := &tasks.Envelope{ID: "missed", Agent: "slow", Queue: tasks.DefaultQueue, EnqueuedAt: time.Now().UTC()}
	_, err := st.Create(ctx, record.New{ID: env.ID, Seed: record.SeedOf(env), State: tasks.StateCanceled})
	require.NoError(t, err)
	require.NoError(t, c.EnqueueRun(ctx, env, 0))
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent of a canceled task was not stopped")
	}
	asynqGone(t, rdb, "missed", 10*time.Second)

	later := &tasks.Envelope{ID: "later", Agent: "slow", Queue: tasks.DefaultQueue, EnqueuedAt: time.Now().UTC()}
	_, err = st.Create(ctx, record.New{ID: later.ID, Seed: record.SeedOf(later), State: tasks.StateCanceled})
	require.NoError(t, err)
	later.Run, later.Restarts = 1, 1
	require.NoError(t, c.EnqueueRun(ctx, later, 0))
	asynqGone(t, rdb, "later#1", 10*time.Second)
	require.Equal(t, int32(1), calls.Load(), "the restart run of a canceled task did not call its agent")
	v, err := st.Get(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, tasks.StateCanceled, v.State)
}

// TestCancelDeferredTask: a task deferred by its open breaker is removed
// from asynq's retry set by its cancel and never calls its agent, not even
// once the breaker closes and wakes the deferred tasks.
func TestCancelDeferredTask(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	w, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
agents:
  llm: {}
`, WithAgent("llm", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(`{}`), nil
	})))
	ctx := context.Background()
	require.NoError(t, w.breakers.Trip(ctx, "llm", time.Hour))
	c := tasks.NewClient(rdb)
	for _, id := range []string{"deferred", "control"} {
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "llm"})
		require.NoError(t, err)
	}
	waitState(t, rdb, "deferred", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeferred })
	// The deferral is recorded before asynq files the task in its retry
	// set: wait for it there.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, "deferred")
		if err == nil && info.State == asynq.TaskStateRetry {
			break
		}
		require.True(t, time.Now().Before(deadline), "the deferred task is not in the retry set")
		time.Sleep(10 * time.Millisecond)
	}
	res, err := c.Cancel(ctx, "deferred", "not worth the wait")
	require.NoError(t, err)
	require.Equal(t, tasks.StateDeferred, res.PreviousState)
	require.True(t, res.Removed)
	asynqGone(t, rdb, "deferred", time.Second)

	require.NoError(t, w.breakers.Reset(ctx, "llm"))
	waitTerminal(t, rdb, []string{"control"}, 30*time.Second)
	require.Equal(t, int32(1), calls.Load(), "only the task that was not canceled ran")
	v, err := c.Store().Get(ctx, "deferred")
	require.NoError(t, err)
	require.Equal(t, tasks.StateCanceled, v.State)
}

// TestCancelAbortsHTTPCall: the cancel of a task whose HTTP agent is
// waiting for its backend aborts the request (the backend sees it go).
func TestCancelAbortsHTTPCall(t *testing.T) {
	t.Parallel()
	arrived, aborted := make(chan struct{}, 1), make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client going
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			aborted <- struct{}{}
		case <-time.After(time.Minute):
		}
	}))
	defer be.Close()
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults: {timeout: 5m}
agents:
  web:
    http: {url: %q}
`, be.URL))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "call", Agent: "web"})
	require.NoError(t, err)
	<-arrived
	waitState(t, rdb, "call", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateActive })
	res, err := c.Cancel(ctx, "call", "")
	require.NoError(t, err)
	require.True(t, res.Stopping)
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP call was not aborted")
	}
	asynqGone(t, rdb, "call", 10*time.Second)
	v, err := c.Store().Get(ctx, "call")
	require.NoError(t, err)
	require.Equal(t, tasks.StateCanceled, v.State)
}
