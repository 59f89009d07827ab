package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// TestClientConformance runs the client and store on miniredis and a real
// redis-server.
func TestClientConformance(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			c := NewClient(rdb)

			t.Run("idempotent by ID", func(t *testing.T) {
				res, err := c.Enqueue(ctx, Task{ID: "job-1", Agent: "tool", Params: json.RawMessage(`{"a":1}`)})
				require.NoError(t, err)
				require.False(t, res.Duplicate)
				require.Equal(t, StatePending, res.State)
				res, err = c.Enqueue(ctx, Task{ID: "job-1", Agent: "tool"})
				require.NoError(t, err)
				require.True(t, res.Duplicate)
				info, err := asynq.NewInspectorFromRedisClient(rdb).ListPendingTasks(DefaultQueue)
				require.NoError(t, err)
				require.Len(t, info, 1, "a repeated ID is not enqueued twice")
				v, err := c.Store().Get(ctx, "job-1")
				require.NoError(t, err)
				require.Equal(t, "tool", v.Agent)
				require.Len(t, v.History, 1)
				require.Equal(t, EventQueued, v.History[0].Event)
			})

			t.Run("random ID and delay", func(t *testing.T) {
				res, err := c.Enqueue(ctx, Task{Agent: "tool"}, ProcessIn(time.Hour))
				require.NoError(t, err)
				require.Len(t, res.ID, 24)
				require.Equal(t, StateScheduled, res.State)
			})

			t.Run("invalid task", func(t *testing.T) {
				_, err := c.Enqueue(ctx, Task{ID: "x"})
				require.ErrorIs(t, err, ErrInvalidEnvelope)
			})

			t.Run("begin fences stale runs", func(t *testing.T) {
				env := &Envelope{ID: "job-2", Agent: "tool", Run: 1}
				n, err := c.Store().Begin(ctx, env)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				_, err = c.Store().Begin(ctx, &Envelope{ID: "job-2", Agent: "tool", Run: 0})
				require.ErrorIs(t, err, ErrStale)
				n, err = c.Store().Begin(ctx, &Envelope{ID: "job-2", Agent: "tool", Run: 2})
				require.NoError(t, err)
				require.Equal(t, 2, n)
			})

			t.Run("begin transition records start and outcome in one step", func(t *testing.T) {
				res, err := c.Enqueue(ctx, Task{ID: "job-4", Agent: "tool", CorrelationID: "corr"})
				require.NoError(t, err)
				require.Equal(t, StatePending, res.State)
				env := &Envelope{ID: "job-4", Agent: "tool", Run: 0}
				n, err := c.Store().BeginTransition(ctx, env, Patch{State: StateSucceeded, ClearError: true, Result: json.RawMessage(`{"ok":true}`)},
					Event{Event: EventSucceeded, Attempt: 1, Agent: "tool"})
				require.NoError(t, err)
				require.Equal(t, 1, n)
				v, err := c.Store().Get(ctx, "job-4")
				require.NoError(t, err)
				require.Equal(t, StateSucceeded, v.State)
				require.Equal(t, 1, v.Attempts)
				require.Equal(t, "corr", v.CorrelationID, "fields Create wrote are kept")
				require.JSONEq(t, `{"ok":true}`, string(v.Result))
				require.Len(t, v.History, 2)
				require.Equal(t, EventSucceeded, v.History[1].Event)

				// A record without Create's fields (a bare asynq task) is seeded.
				n, err = c.Store().BeginTransition(ctx, &Envelope{ID: "job-5", Agent: "tool", Action: "go", Queue: "q", Restarts: 2, Run: 3},
					Patch{State: StateRetrying, ErrorClass: "timeout", Error: "slow"}, Event{Event: EventRetrying, Attempt: 1})
				require.NoError(t, err)
				require.Equal(t, 1, n)
				v, err = c.Store().Get(ctx, "job-5")
				require.NoError(t, err)
				require.Equal(t, View{ID: "job-5", Agent: "tool", Action: "go", State: StateRetrying, Attempts: 1, Restarts: 2,
					ErrorClass: "timeout", Error: "slow", Queue: "q", Run: 3}, View{ID: v.ID, Agent: v.Agent, Action: v.Action,
					State: v.State, Attempts: v.Attempts, Restarts: v.Restarts, ErrorClass: v.ErrorClass, Error: v.Error, Queue: v.Queue, Run: v.Run})

				// Patch fields override the delivery's run (a restart's outcome).
				next, restarts := 4, 3
				n, err = c.Store().BeginTransition(ctx, &Envelope{ID: "job-5", Agent: "tool", Restarts: 2, Run: 3},
					Patch{State: StateRestarting, Run: &next, Restarts: &restarts}, Event{Event: EventRestarting, Attempt: 2})
				require.NoError(t, err)
				require.Equal(t, 2, n)
				v, err = c.Store().Get(ctx, "job-5")
				require.NoError(t, err)
				require.Equal(t, 4, v.Run)
				require.Equal(t, 3, v.Restarts)

				// A superseded run writes nothing.
				_, err = c.Store().BeginTransition(ctx, &Envelope{ID: "job-5", Agent: "tool", Run: 3},
					Patch{State: StateSucceeded}, Event{Event: EventSucceeded, Attempt: 1})
				require.ErrorIs(t, err, ErrStale)
				after, err := c.Store().Get(ctx, "job-5")
				require.NoError(t, err)
				require.Equal(t, v.State, after.State)
				require.Equal(t, v.Attempts, after.Attempts)
				require.Len(t, after.History, len(v.History))
			})

			t.Run("run IDs are idempotent", func(t *testing.T) {
				env := &Envelope{ID: "job-3", Agent: "tool", Run: 4}
				require.NoError(t, c.EnqueueRun(ctx, env, time.Minute))
				require.ErrorIs(t, c.EnqueueRun(ctx, env, time.Minute), ErrDuplicate)
			})

			t.Run("get unknown", func(t *testing.T) {
				_, err := c.Store().Get(ctx, "nope")
				require.ErrorIs(t, err, ErrNotFound)
			})
		})
	}
}
