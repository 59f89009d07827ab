package wake

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestWakeOnlyDeferredTasks: a breaker's close wakes the tasks deferred on
// it, recognised by their record's state, not by the error text asynq
// kept: a retry of a failed attempt whose error read "breaker open" (the
// text deferrals once had) waits for its backoff.
func TestWakeOnlyDeferredTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	rec := record.NewStore(rdb)
	l := New(rdb, rec, Options{Queues: []string{tasks.DefaultQueue}})
	for id, change := range map[string]record.Change{
		"deferred": record.Deferred(record.Attempt{}, record.WaitingBreaker, "breaker \"a\" is open", time.Minute),
		"retrying": record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "provider_error", Error: "breaker open"}, time.Minute, time.Now().Add(time.Minute)),
	} {
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "a"})
		require.NoError(t, err)
		_, err = rec.Apply(ctx, record.Delivery{ID: id, Attempt: 1}, change)
		require.NoError(t, err)
		// Move it from pending to asynq's retry set, as a deferral or a retry would.
		require.NoError(t, rdb.LRem(ctx, broker.PendingKey(tasks.DefaultQueue), 0, id).Err())
		require.NoError(t, rdb.ZAdd(ctx, "asynq:{default}:retry", redis.Z{Score: float64(time.Now().Add(time.Minute).Unix()), Member: id}).Err())
		require.NoError(t, rdb.HSet(ctx, broker.TaskKey(tasks.DefaultQueue, id), "state", "retry").Err())
	}
	require.Equal(t, 1, l.wake(ctx, asynq.NewInspectorFromRedisClient(rdb), []string{"a"}))
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info, err := insp.GetTaskInfo(tasks.DefaultQueue, "deferred")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)
	info, err = insp.GetTaskInfo(tasks.DefaultQueue, "retrying")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateRetry, info.State, "a retry waits for its backoff")
}
