package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestSweepDeadlines: one sweep, at a time past the deadlines, dead-letters
// every waiting task whatever it waits in (pending, scheduled, a deferral
// or a retry in asynq's retry set, a restart in the scheduled set with its
// restart slot), deletes its run from asynq and drops its entry; it leaves
// a running task (asynq active) and its entry alone, and drops the entries
// of an ended task (unchanged) and of an ID without a record. No agent is
// called (the worker is not even running).
func TestSweepDeadlines(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	called := false
	w := newTestWorker(t, srv, "", "agents:\n  a: {}\n", WithAgent("a", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		called = true
		return json.RawMessage(`{}`), nil
	})))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	rec := record.NewStore(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(time.Hour)
	enqueue := func(id string, opts ...tasks.EnqueueOption) {
		t.Helper()
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "a", Deadline: deadline}, opts...)
		require.NoError(t, err)
	}
	toRetrySet := func(id string, ch record.Change) {
		t.Helper()
		_, err := rec.Apply(ctx, record.Delivery{ID: id, Attempt: 1}, ch)
		require.NoError(t, err)
		require.NoError(t, rdb.LRem(ctx, broker.PendingKey(tasks.DefaultQueue), 0, id).Err())
		require.NoError(t, rdb.ZAdd(ctx, "asynq:{default}:retry", redis.Z{Score: float64(time.Now().Add(time.Minute).Unix()), Member: id}).Err())
		require.NoError(t, rdb.HSet(ctx, broker.TaskKey(tasks.DefaultQueue, id), "state", "retry").Err())
	}

	enqueue("pending")
	enqueue("scheduled", tasks.ProcessIn(time.Minute))
	enqueue("deferred")
	toRetrySet("deferred", record.Deferred(record.Attempt{}, record.WaitingBreaker, "breaker \"a\" is open", time.Minute))
	enqueue("retrying")
	toRetrySet("retrying", record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "provider_error", Error: "boom"}, time.Minute, time.Now().Add(time.Minute)))
	// A restart waiting in the scheduled set (run 1), with its slot in the restart index.
	enqueue("restarting")
	require.NoError(t, insp.DeleteTask(tasks.DefaultQueue, "restarting"))
	next := &tasks.Envelope{ID: "restarting", Agent: "a", Queue: tasks.DefaultQueue, Run: 1, Restarts: 1, Deadline: deadline.UnixMilli()}
	require.NoError(t, c.EnqueueRun(ctx, next, time.Minute))
	_, err := rec.Apply(ctx, record.Delivery{ID: "restarting", Attempt: 1},
		record.Restarting(record.Attempt{Attempt: 1, ErrorClass: "timeout", Error: "slow"}, record.NextRun{Run: 1, Restarts: 1}, time.Minute))
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "restarting"}).Err())
	// Running: asynq holds it active (its record is still pending: a first run's lazy start).
	enqueue("running")
	require.NoError(t, rdb.LRem(ctx, broker.PendingKey(tasks.DefaultQueue), 0, "running").Err())
	require.NoError(t, rdb.HSet(ctx, broker.TaskKey(tasks.DefaultQueue, "running"), "state", "active").Err())
	enqueue("done")
	_, err = rec.Apply(ctx, record.Delivery{ID: "done", Attempt: 1}, record.Succeeded(record.Attempt{Attempt: 1}, json.RawMessage(`{}`)))
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, rkeys.Deadlines(), redis.Z{Score: float64(deadline.UnixMilli()), Member: "ghost"}).Err())
	// A requeued dead letter: its new run has no deadline, its old entry remains.
	_, err = c.Enqueue(ctx, tasks.Task{ID: "requeued", Agent: "a"})
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, rkeys.Deadlines(), redis.Z{Score: float64(deadline.UnixMilli()), Member: "requeued"}).Err())

	n, err := w.sweeper.Sweep(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "nothing is past its deadline yet")
	n, err = w.sweeper.Sweep(ctx, deadline.Add(time.Second))
	require.NoError(t, err)
	waiting := []string{"pending", "scheduled", "deferred", "retrying", "restarting"}
	require.Equal(t, len(waiting), n)

	dlq := deadletter.NewStore(rdb)
	for _, id := range waiting {
		v, err := rec.Get(ctx, id)
		require.NoError(t, err)
		requireDeadLetteredByDeadline(t, v, dlq)
		require.Contains(t, v.Error, "while the task was waiting", id)
		aid := (&tasks.Envelope{ID: id, Run: v.Run}).AsynqID()
		_, err = insp.GetTaskInfo(tasks.DefaultQueue, aid)
		require.True(t, errors.Is(err, asynq.ErrTaskNotFound), "%s: its run %s is still in asynq (%v)", id, aid, err)
	}
	_, err = rdb.ZScore(ctx, rkeys.RestartPending(), "restarting").Result()
	require.ErrorIs(t, err, redis.Nil, "the restart's slot is freed")
	v, err := rec.Get(ctx, "done")
	require.NoError(t, err)
	require.Equal(t, record.StateSucceeded, v.State)
	v, err = rec.Get(ctx, "requeued")
	require.NoError(t, err)
	require.Equal(t, record.StatePending, v.State, "a run without a deadline is not swept")
	v, err = rec.Get(ctx, "running")
	require.NoError(t, err)
	require.Equal(t, record.StatePending, v.State, "a running task is left to its worker")
	left, err := rdb.ZRange(ctx, rkeys.Deadlines(), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"running"}, left)
	require.False(t, called)
}

// TestDeadlinesOutliveALostQueueSet: asynq's set of queues lost while
// tasks wait with a deadline (a FLUSHALL, a restart without persistence,
// a failover to a replica that missed the write: asynq's inspector then
// answers "queue not found") does not hold the deadlines up: the sweep
// past them dead-letters every waiting task and takes its run off its
// queue, and the queue is registered again from the records.
func TestDeadlinesOutliveALostQueueSet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	w := newTestWorker(t, srv, "", "agents:\n  a: {}\n", WithAgent("a", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	deadline := time.Now().Add(time.Hour)
	ids := []string{"d-1", "d-2", "d-3"}
	for _, id := range ids {
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "a", Queue: "q", Deadline: deadline})
		require.NoError(t, err)
	}
	require.NoError(t, rdb.Del(ctx, broker.AllQueues).Err())

	n, err := w.sweeper.Sweep(ctx, deadline.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, len(ids), n, "every waiting task past its deadline is dead-lettered")
	rec := record.NewStore(rdb)
	dlq := deadletter.NewStore(rdb)
	for _, id := range ids {
		v, err := rec.Get(ctx, id)
		require.NoError(t, err)
		requireDeadLetteredByDeadline(t, v, dlq)
	}
	pending, err := rdb.LLen(ctx, broker.PendingKey("q")).Result()
	require.NoError(t, err)
	require.Zero(t, pending, "their runs are off the queue")
	left, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
	require.NoError(t, err)
	require.Zero(t, left)
	ok, err := rdb.SIsMember(ctx, broker.AllQueues, "q").Result()
	require.NoError(t, err)
	require.True(t, ok, "the queue the records name is registered again")
}
