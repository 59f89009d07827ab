package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestCancel cancels tasks in every waiting state on a real redis-server:
// each is taken off its queue, its record says canceled with the reason,
// and every later write of a worker is refused.
func TestCancel(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := NewClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)

	queued := func(aid string) bool {
		_, err := insp.GetTaskInfo(DefaultQueue, aid)
		return err == nil
	}

	t.Run("pending", func(t *testing.T) {
		_, err := c.Enqueue(ctx, Task{ID: "c-pending", Agent: "tool"})
		require.NoError(t, err)
		res, err := c.Cancel(ctx, "c-pending", "user left")
		require.NoError(t, err)
		require.Equal(t, CancelResult{ID: "c-pending", State: StateCanceled, PreviousState: StatePending, Removed: true, Reason: "user left"}, res)
		require.False(t, queued("c-pending"), "the run is off its queue")
		v, err := c.Store().Get(ctx, "c-pending")
		require.NoError(t, err)
		require.Equal(t, StateCanceled, v.State)
		require.Equal(t, "user left", v.CancelReason)
		require.Equal(t, "canceled: user left", v.Error)
		require.NotEmpty(t, v.CanceledAt)
		last := v.History[len(v.History)-1]
		require.Equal(t, EventTaskCanceled, last.Event)
		require.Equal(t, "user left", last.Reason)
		require.Equal(t, "canceled: user left", last.Error)
	})

	t.Run("scheduled", func(t *testing.T) {
		_, err := c.Enqueue(ctx, Task{ID: "c-sched", Agent: "tool"}, ProcessIn(time.Hour))
		require.NoError(t, err)
		res, err := c.Cancel(ctx, "c-sched", "")
		require.NoError(t, err)
		require.Equal(t, StateScheduled, res.PreviousState)
		require.True(t, res.Removed)
		require.False(t, queued("c-sched"))
		v, err := c.Store().Get(ctx, "c-sched")
		require.NoError(t, err)
		require.Equal(t, "canceled", v.Error, "no reason: the event says canceled")
	})

	t.Run("restarting", func(t *testing.T) {
		env := &Envelope{ID: "c-restart", Agent: "tool", Queue: DefaultQueue, EnqueuedAt: time.Now()}
		_, err := c.Store().Create(ctx, env, StateActive, Event{Event: EventQueued})
		require.NoError(t, err)
		next := *env
		next.Run, next.Restarts = 1, 1
		require.NoError(t, c.EnqueueRun(ctx, &next, time.Hour))
		require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: 1, Member: "c-restart"}).Err())
		require.NoError(t, c.Store().Apply(ctx, env.ID, SetRestarting(Outcome{Attempt: 1, ErrorClass: "timeout"}, &next, time.Hour)))

		res, err := c.Cancel(ctx, "c-restart", "stop it")
		require.NoError(t, err)
		require.Equal(t, StateRestarting, res.PreviousState)
		require.True(t, res.Removed)
		require.False(t, queued(next.AsynqID()), "the restart run is off its queue")
		n, err := rdb.ZCard(ctx, rkeys.RestartPending()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the restart index slot is freed")
	})

	t.Run("active: the worker is told, its writes are refused", func(t *testing.T) {
		_, err := c.Enqueue(ctx, Task{ID: "c-active", Agent: "tool"})
		require.NoError(t, err)
		env := &Envelope{ID: "c-active", Agent: "tool", Queue: DefaultQueue}
		_, err = c.Store().Begin(ctx, env)
		require.NoError(t, err)
		// asynq holds the run as active: DeleteTask refuses, CancelProcessing is published.
		sub := rdb.Subscribe(ctx, "asynq:cancel")
		defer sub.Close()
		_, err = sub.Receive(ctx)
		require.NoError(t, err)
		_, err = rdb.LMove(ctx, "asynq:{default}:pending", "asynq:{default}:active", "RIGHT", "LEFT").Result()
		require.NoError(t, err)
		require.NoError(t, rdb.HSet(ctx, "asynq:{default}:t:c-active", "state", "active").Err())

		res, err := c.Cancel(ctx, "c-active", "")
		require.NoError(t, err)
		require.Equal(t, StateActive, res.PreviousState)
		require.False(t, res.Removed)
		require.True(t, res.Stopping)
		msg, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, "c-active", msg.Payload)

		// Every write a worker would make now is refused.
		o := Outcome{Attempt: 1}
		require.ErrorIs(t, c.Store().Apply(ctx, env.ID, SetSucceeded(o, json.RawMessage(`{}`))), ErrCanceled)
		require.ErrorIs(t, c.Store().Apply(ctx, env.ID, SetRetrying(o, time.Second, time.Now())), ErrCanceled)
		require.ErrorIs(t, c.Store().Apply(ctx, env.ID, SetCanceled(o)), ErrCanceled)
		require.ErrorIs(t, c.Store().Apply(ctx, env.ID, SetDeferred(o, "x", time.Second)), ErrCanceled)
		require.ErrorIs(t, c.Store().Apply(ctx, env.ID, SetDeadLettered(o)), ErrCanceled)
		_, err = c.Store().ApplyIfRun(ctx, env.ID, 0, SetSucceeded(o, nil))
		require.ErrorIs(t, err, ErrCanceled)
		_, err = c.Store().Begin(ctx, env)
		require.ErrorIs(t, err, ErrCanceled)
		_, err = c.Store().Begin(ctx, &Envelope{ID: "c-active", Agent: "tool", Run: 1, Restarts: 1})
		require.ErrorIs(t, err, ErrCanceled, "a later run (a restart) is refused too")
		_, err = c.Store().BeginTransition(ctx, env, Patch{State: StateSucceeded}, Event{Event: EventSucceeded})
		require.ErrorIs(t, err, ErrCanceled)
		v, err := c.Store().Get(ctx, "c-active")
		require.NoError(t, err)
		require.Equal(t, StateCanceled, v.State)
		require.Equal(t, EventTaskCanceled, v.History[len(v.History)-1].Event, "nothing was written after the cancel")
		rs, err := c.Store().RunState(ctx, "c-active")
		require.NoError(t, err)
		require.True(t, rs.Ended(0))
		require.True(t, rs.Ended(3), "a cancel ends every run")
	})

	t.Run("refusals", func(t *testing.T) {
		_, err := c.Cancel(ctx, "nobody", "")
		require.ErrorIs(t, err, ErrNotFound)

		_, err = c.Cancel(ctx, "c-pending", "again")
		var ended *EndedError
		require.ErrorAs(t, err, &ended)
		require.ErrorIs(t, err, ErrTaskEnded)
		require.Equal(t, StateCanceled, ended.State)

		_, err = c.Enqueue(ctx, Task{ID: "c-done", Agent: "tool"})
		require.NoError(t, err)
		require.NoError(t, c.Store().Apply(ctx, "c-done", SetSucceeded(Outcome{Attempt: 1}, nil)))
		_, err = c.Cancel(ctx, "c-done", "")
		require.ErrorAs(t, err, &ended)
		require.Equal(t, StateSucceeded, ended.State)
		v, err := c.Store().Get(ctx, "c-done")
		require.NoError(t, err)
		require.Equal(t, StateSucceeded, v.State, "a refused cancel changes nothing")

		// A dead letter whose record has expired.
		require.NoError(t, rdb.HSet(ctx, rkeys.DLQEntries(), "c-dead", "{}").Err())
		_, err = c.Cancel(ctx, "c-dead", "")
		require.ErrorAs(t, err, &ended)
		require.Equal(t, StateDeadLettered, ended.State)

		_, err = c.Cancel(ctx, "c-done", string(make([]byte, MaxCancelReason+1)))
		var ve *ValidationError
		require.True(t, errors.As(err, &ve))
		require.Equal(t, "reason", ve.Field)
	})

	t.Run("a canceled ID is a duplicate", func(t *testing.T) {
		res, err := c.Enqueue(ctx, Task{ID: "c-pending", Agent: "tool"})
		require.NoError(t, err)
		require.True(t, res.Duplicate)
		require.Equal(t, StateCanceled, res.State)
		require.False(t, queued("c-pending"))
	})
}
