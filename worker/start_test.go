package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

const startYAML = `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 10s
  retry: {max_attempts: 2}
agents:
  tool: {}
`

// waitState polls task id's record until cond holds (deadline d).
func waitState(t *testing.T, rdb redis.UniversalClient, id string, d time.Duration, cond func(*tasks.View) bool) *tasks.View {
	t.Helper()
	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(d)
	for {
		v, err := st.Get(context.Background(), id)
		if err == nil && cond(v) {
			return v
		}
		require.True(t, time.Now().Before(deadline), "task %s: condition not met within %s (last: %+v, err %v)", id, d, v, err)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFirstAttemptStart: a first delivery's start is written with its
// outcome when the call is quick, and beginGrace into the call when it is
// not ("active" while it runs); either way the attempt is counted once.
func TestFirstAttemptStart(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	gate := make(chan struct{})
	_, rdb := runWorker(t, startYAML, WithAgent("tool", agent.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
		n.Add(1)
		if r.Action == "slow" { // held until the test has seen it active
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return json.RawMessage(`{"ok":true}`), nil
	})))
	c := tasks.NewClient(rdb)
	ctx := context.Background()

	_, err := c.Enqueue(ctx, tasks.Task{ID: "quick", Agent: "tool"})
	require.NoError(t, err)
	v := waitState(t, rdb, "quick", 10*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Attempts)
	require.Equal(t, []string{"succeeded@tool"}, eventsOf(v))
	require.JSONEq(t, `{"ok":true}`, string(v.Result))

	_, err = c.Enqueue(ctx, tasks.Task{ID: "slow", Agent: "tool", Action: "slow"})
	require.NoError(t, err)
	v = waitState(t, rdb, "slow", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateActive })
	require.Equal(t, 1, v.Attempts, "the start of a long call is in the record while it runs")
	close(gate)
	v = waitState(t, rdb, "slow", 10*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Attempts, "the attempt is counted once")
	require.Equal(t, []string{"succeeded@tool"}, eventsOf(v))
	require.EqualValues(t, 2, n.Load())
}

// TestStaleFirstDelivery: a first delivery of a run the record has moved
// past (asynq put it back at a shutdown deadline after its worker recorded
// the next run) runs, but its outcome is not recorded and asynq drops it,
// whether its call ends before beginGrace (start written with the outcome)
// or after (the deferred start finds the run superseded).
func TestStaleFirstDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		call time.Duration // how long the agent takes
	}{{"quick", 0}, {"slower than the grace", 300 * time.Millisecond}} { // 3× the delivery's beginGrace
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			slowAgent := agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
				n.Add(1)
				select {
				case <-time.After(tc.call): // the agent's own work
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return json.RawMessage(`{}`), nil
			})
			_, rdb := runWorker(t, startYAML, WithAgent("tool", slowAgent))
			ctx := context.Background()
			c := tasks.NewClient(rdb)
			st := c.Store()
			// The record is at run 1; run 0 is delivered again.
			_, err := record.StoreOf(st).Apply(ctx, record.Delivery{ID: "t", Run: 1, Attempt: 1, Seed: record.Seed{Agent: "tool"}}, record.Started())
			require.NoError(t, err)
			before, err := st.Get(ctx, "t")
			require.NoError(t, err)
			require.NoError(t, c.EnqueueRun(ctx, &tasks.Envelope{ID: "t", Agent: "tool", Run: 0, EnqueuedAt: time.Now()}, 0))

			insp := asynq.NewInspectorFromRedisClient(rdb)
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := insp.GetTaskInfo(tasks.DefaultQueue, "t")
				if errors.Is(err, asynq.ErrTaskNotFound) {
					break // acknowledged, not retried
				}
				require.True(t, time.Now().Before(deadline), "the stale run was not acknowledged: %v", err)
				time.Sleep(5 * time.Millisecond)
			}
			require.EqualValues(t, 1, n.Load(), "a first delivery runs before it is fenced")
			after, err := st.Get(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, before.State, after.State)
			require.Equal(t, before.Attempts, after.Attempts)
			require.Equal(t, 1, after.Run)
			require.Len(t, after.History, len(before.History), "nothing recorded for the stale run")
		})
	}
}
