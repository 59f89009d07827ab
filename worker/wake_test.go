package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestCeilToSecond: a deferral's delay is stretched to the next whole
// second (asynq truncates due times to seconds), never shortened.
func TestCeilToSecond(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now   time.Time
		delay time.Duration
		want  time.Duration
	}{
		{base, time.Second, time.Second},
		{base, 300 * time.Millisecond, time.Second},
		{base.Add(700 * time.Millisecond), 300 * time.Millisecond, 300 * time.Millisecond},
		{base.Add(700 * time.Millisecond), 997 * time.Millisecond, 1300 * time.Millisecond},
		{base.Add(999 * time.Millisecond), 2 * time.Millisecond, 1001 * time.Millisecond},
		{base.Add(250 * time.Millisecond), 30 * time.Second, 30*time.Second + 750*time.Millisecond},
	} {
		got := ceilToSecond(tc.now, tc.delay)
		require.Equal(t, tc.want, got, "now %s delay %s", tc.now.Format("05.000"), tc.delay)
		require.GreaterOrEqual(t, got, tc.delay)
		require.Zero(t, tc.now.Add(got).Nanosecond())
	}
}

// TestWakeOnlyDeferredTasks: a breaker's close wakes the tasks deferred on
// it, recognised by their record's state, not by the error text asynq
// kept: a retry of a failed attempt whose error read "breaker open" (the
// text deferrals once had) waits for its backoff.
func TestWakeOnlyDeferredTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	w := newTestWorker(t, srv, "", "agents:\n  a: {}\n", WithAgent("a", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	rec := record.NewStore(rdb)
	for id, change := range map[string]record.Change{
		"deferred": record.Deferred(record.Attempt{}, "breaker \"a\" is open", time.Minute),
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
	require.Equal(t, 1, w.wake(ctx, asynq.NewInspectorFromRedisClient(rdb), []string{"a"}))
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info, err := insp.GetTaskInfo(tasks.DefaultQueue, "deferred")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)
	info, err = insp.GetTaskInfo(tasks.DefaultQueue, "retrying")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateRetry, info.State, "a retry waits for its backoff")
}
