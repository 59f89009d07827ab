package tasks_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// deadWithoutRecord enqueues task id, then leaves it as a task that died
// long ago: its asynq task done, a dead letter in the store, and its record
// and history expired. It returns the dead letter as stored.
func deadWithoutRecord(t *testing.T, rdb redis.UniversalClient, c *tasks.Client, dlq *deadletter.Store, id string) *deadletter.Entry {
	t.Helper()
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "tool", Action: "old", Params: json.RawMessage(`{"v":"old"}`)})
	require.NoError(t, err)
	require.NoError(t, asynq.NewInspectorFromRedisClient(rdb).DeleteTask(tasks.DefaultQueue, id), "the worker finished it")
	_, err = dlq.Put(ctx, &deadletter.Entry{ID: id, Agent: "tool", Action: "old", Params: json.RawMessage(`{"v":"old"}`),
		ErrorClass: "logic_error", Error: "boom", Reason: deadletter.ReasonNotRetryable, Attempts: 1, Queue: tasks.DefaultQueue,
		DeadLetteredAt: time.Unix(1700000000, 0).UTC(), History: []tasks.Event{{Event: tasks.EventDeadLettered, Attempt: 1}}})
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, rkeys.Task(id), rkeys.TaskHistory(id)).Err(), "the retention passed")
	e, err := dlq.Get(ctx, id)
	require.NoError(t, err)
	return e
}

// TestEnqueueKeepsDeadLetter (issue #11 item 6): a new task with the ID of
// a dead letter whose record has expired is a duplicate in state
// dead_lettered, through Enqueue and EnqueueMany: nothing is queued and
// the dead letter is intact.
func TestEnqueueKeepsDeadLetter(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Backends()[1].New(t) // real redis-server
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	dlq := deadletter.NewStore(rdb)
	before := deadWithoutRecord(t, rdb, c, dlq, "dead-1")
	before2 := deadWithoutRecord(t, rdb, c, dlq, "dead-2")
	insp := asynq.NewInspectorFromRedisClient(rdb)
	pending := func() int {
		info, err := insp.GetQueueInfo(tasks.DefaultQueue)
		require.NoError(t, err)
		return info.Pending + info.Scheduled
	}
	require.Zero(t, pending())

	res, err := c.Enqueue(ctx, tasks.Task{ID: "dead-1", Agent: "tool", Action: "new", Params: json.RawMessage(`{"v":"new"}`)})
	require.NoError(t, err)
	require.Equal(t, tasks.Result{ID: "dead-1", Duplicate: true, State: tasks.StateDeadLettered}, res)

	many, err := c.EnqueueMany(ctx, []tasks.Task{
		{ID: "fresh", Agent: "tool"}, {ID: "dead-2", Agent: "tool", Action: "new"}, {ID: "dead-1", Agent: "tool"},
	}, tasks.ProcessIn(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []tasks.Result{
		{ID: "fresh", State: tasks.StateScheduled},
		{ID: "dead-2", Duplicate: true, State: tasks.StateDeadLettered},
		{ID: "dead-1", Duplicate: true, State: tasks.StateDeadLettered},
	}, many)

	require.Equal(t, 1, pending(), "only the fresh task was queued")
	for id, want := range map[string]*deadletter.Entry{"dead-1": before, "dead-2": before2} {
		after, err := dlq.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, after, "the dead letter is intact")
		ok, err := c.Store().Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, "no new record for %s", id)
	}

	// Once the dead letter is requeued, its record is back and the ID is
	// still a duplicate (of the requeued task).
	_, err = dlq.RequeueTask(ctx, c, "dead-1")
	require.NoError(t, err)
	res, err = c.Enqueue(ctx, tasks.Task{ID: "dead-1", Agent: "tool"})
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, tasks.StatePending, res.State)
}
