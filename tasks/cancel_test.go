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

	"github.com/agentq/agentq/internal/record"
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
		_, err := c.store.rec.Create(ctx, record.New{ID: env.ID, Seed: env.seed(), State: StateActive})
		require.NoError(t, err)
		next := *env
		next.Run, next.Restarts = 1, 1
		require.NoError(t, c.EnqueueRun(ctx, &next, time.Hour))
		require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: 1, Member: "c-restart"}).Err())
		out, err := c.store.rec.Apply(ctx, delivery(env, 1), record.Restarting(record.Attempt{Attempt: 1, ErrorClass: "timeout"},
			record.NextRun{Run: next.Run, Restarts: next.Restarts}, time.Hour))
		require.NoError(t, err)
		require.Equal(t, record.Applied, out)

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
		out, err := c.store.rec.Apply(ctx, delivery(env, 1), record.Started())
		require.NoError(t, err)
		require.Equal(t, record.Applied, out)
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

		// Every write a worker would make now is refused, for the
		// canceled run and for a later one (a restart).
		a := record.Attempt{Attempt: 1, Agent: "tool", ErrorClass: "timeout", Error: "slow"}
		next := record.NextRun{Run: 1, Restarts: 1}
		canceled, err := rdb.HGetAll(ctx, rkeys.Task("c-active")).Result()
		require.NoError(t, err)
		for _, d := range []record.Delivery{delivery(env, 1), delivery(&Envelope{ID: "c-active", Agent: "tool", Run: 1, Restarts: 1}, 1)} {
			for _, ch := range []record.Change{
				record.Started(),
				record.Succeeded(a, json.RawMessage(`{}`)),
				record.Retrying(a, time.Second, time.Now().Add(time.Second)),
				record.CallFailed(a),
				record.Interrupted(a),
				record.Restarting(a, next, time.Second),
				record.RestartRecovered(a, next),
				record.DeadLettered(a, "not_retryable"),
				record.Deferred(a, record.WaitingBreaker, "breaker open", time.Second),
			} {
				out, err := c.store.rec.Apply(ctx, d, ch)
				require.NoError(t, err)
				require.Equal(t, record.Canceled, out, "run %d: %+v", d.Run, ch)
			}
		}
		after, err := rdb.HGetAll(ctx, rkeys.Task("c-active")).Result()
		require.NoError(t, err)
		require.Equal(t, canceled, after, "the record is as the cancel left it")
		v, err := c.Store().Get(ctx, "c-active")
		require.NoError(t, err)
		require.Equal(t, StateCanceled, v.State)
		require.Equal(t, EventTaskCanceled, v.History[len(v.History)-1].Event, "nothing was written after the cancel")
		rs, err := c.store.rec.RunState(ctx, "c-active")
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
		out, err := c.store.rec.Apply(ctx, delivery(&Envelope{ID: "c-done", Agent: "tool"}, 1), record.Succeeded(record.Attempt{Attempt: 1}, nil))
		require.NoError(t, err)
		require.Equal(t, record.Applied, out)
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
