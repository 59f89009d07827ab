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
