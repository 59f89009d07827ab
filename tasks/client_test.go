package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
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

			t.Run("apply fences stale runs", func(t *testing.T) {
				rec := c.store.rec
				out, err := rec.Apply(ctx, delivery(&Envelope{ID: "job-2", Agent: "tool", Run: 1}, 1), record.Started())
				require.NoError(t, err)
				require.Equal(t, record.Applied, out, "a missing record is seeded")
				before := redistest.Dump(t, rdb)
				out, err = rec.Apply(ctx, delivery(&Envelope{ID: "job-2", Agent: "tool", Run: 0}, 1), record.Started())
				require.NoError(t, err)
				require.Equal(t, record.Stale, out)
				require.Equal(t, before, redistest.Dump(t, rdb), "a stale run writes nothing")
				out, err = rec.Apply(ctx, delivery(&Envelope{ID: "job-2", Agent: "tool", Run: 2}, 1), record.Started())
				require.NoError(t, err)
				require.Equal(t, record.Applied, out)
				v, err := c.Store().Get(ctx, "job-2")
				require.NoError(t, err)
				require.Equal(t, 2, v.Run)
				require.Equal(t, 2, v.Attempts, "run 1's attempt and run 2's first")
			})

			t.Run("apply records start and outcome in one step", func(t *testing.T) {
				rec := c.store.rec
				res, err := c.Enqueue(ctx, Task{ID: "job-4", Agent: "tool", CorrelationID: "corr"})
				require.NoError(t, err)
				require.Equal(t, StatePending, res.State)
				env := &Envelope{ID: "job-4", Agent: "tool", Run: 0}
				out, err := rec.Apply(ctx, delivery(env, 1), record.Succeeded(record.Attempt{Attempt: 1, Agent: "tool"}, json.RawMessage(`{"ok":true}`)))
				require.NoError(t, err)
				require.Equal(t, record.Applied, out)
				v, err := c.Store().Get(ctx, "job-4")
				require.NoError(t, err)
				require.Equal(t, StateSucceeded, v.State)
				require.Equal(t, 1, v.Attempts)
				require.Equal(t, "corr", v.CorrelationID, "fields Create wrote are kept")
				require.JSONEq(t, `{"ok":true}`, string(v.Result))
				require.Len(t, v.History, 2)
				require.Equal(t, EventSucceeded, v.History[1].Event)
				require.EqualValues(t, 2, v.History[1].Seq)

				// A record without Create's fields (a bare asynq task) is seeded from the envelope.
				env5 := &Envelope{ID: "job-5", Agent: "tool", Action: "go", Queue: "q", Restarts: 2, Run: 3}
				out, err = rec.Apply(ctx, delivery(env5, 1), record.Retrying(record.Attempt{Attempt: 1, Restart: 2, ErrorClass: "timeout", Error: "slow"}, time.Second, time.Now().Add(time.Second)))
				require.NoError(t, err)
				require.Equal(t, record.Applied, out)
				v, err = c.Store().Get(ctx, "job-5")
				require.NoError(t, err)
				require.Equal(t, View{ID: "job-5", Agent: "tool", Action: "go", State: StateRetrying, Attempts: 1, Restarts: 2,
					ErrorClass: "timeout", Error: "slow", Queue: "q", Run: 3}, View{ID: v.ID, Agent: v.Agent, Action: v.Action,
					State: v.State, Attempts: v.Attempts, Restarts: v.Restarts, ErrorClass: v.ErrorClass, Error: v.Error, Queue: v.Queue, Run: v.Run})

				// A restart moves the record to its next run.
				out, err = rec.Apply(ctx, delivery(env5, 2), record.Restarting(record.Attempt{Attempt: 2, Restart: 2, ErrorClass: "timeout"},
					record.NextRun{Run: 4, Restarts: 3}, time.Minute))
				require.NoError(t, err)
				require.Equal(t, record.Applied, out)
				v, err = c.Store().Get(ctx, "job-5")
				require.NoError(t, err)
				require.Equal(t, StateRestarting, v.State)
				require.Equal(t, 4, v.Run)
				require.Equal(t, 3, v.Restarts)
				require.Equal(t, 2, v.Attempts, "attempts from the delivery's attempt number")

				// A superseded run writes nothing.
				before := redistest.Dump(t, rdb)
				out, err = rec.Apply(ctx, delivery(env5, 3), record.Succeeded(record.Attempt{Attempt: 3}, nil))
				require.NoError(t, err)
				require.Equal(t, record.Stale, out)
				require.Equal(t, before, redistest.Dump(t, rdb))
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

// TestRunIDsCannotCollideWithTaskIDs (issue #11 item 1): while run 1 of task
// X is queued under the asynq ID "X#1", a new task "X#1" is refused by
// Enqueue and EnqueueMany (field "id", '#' reserved) and X's run is left
// as it was.
func TestRunIDsCannotCollideWithTaskIDs(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			c := NewClient(rdb)
			_, err := c.Enqueue(ctx, Task{ID: "X", Agent: "tool"})
			require.NoError(t, err)
			run1 := &Envelope{ID: "X", Agent: "tool", Queue: DefaultQueue, Run: 1}
			require.NoError(t, c.EnqueueRun(ctx, run1, time.Hour), "X's restart: run 1")

			_, err = c.Enqueue(ctx, Task{ID: "X#1", Agent: "other"})
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "id", ve.Field)
			require.Contains(t, err.Error(), "reserved")

			res, err := c.EnqueueMany(ctx, []Task{{ID: "Y", Agent: "tool"}, {ID: "X#1", Agent: "other"}})
			require.Nil(t, res)
			var te *TaskError
			require.ErrorAs(t, err, &te)
			require.Equal(t, 1, te.Index)
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "id", ve.Field)
			ok, err := c.Store().Exists(ctx, "Y")
			require.NoError(t, err)
			require.False(t, ok, "an invalid batch enqueues nothing")
			ok, err = c.Store().Exists(ctx, "X#1")
			require.NoError(t, err)
			require.False(t, ok)

			// Run 1 of X is still X's: same payload, still scheduled.
			info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(DefaultQueue, "X#1")
			require.NoError(t, err)
			env, err := Decode(info.Payload)
			require.NoError(t, err)
			require.Equal(t, "X", env.ID)
			require.Equal(t, 1, env.Run)
			require.Equal(t, asynq.TaskStateScheduled, info.State)
			// A generated ID never has '#'.
			res1, err := c.Enqueue(ctx, Task{Agent: "tool"})
			require.NoError(t, err)
			require.NoError(t, ValidateID(res1.ID))
		})
	}
}

// TestCreateKeepsRecordPastTheDelay (issue #11 item 7): a task scheduled
// further out than the retention keeps its record and history until its
// first run is due plus the retention, through Enqueue and EnqueueMany; an
// immediate task's record lives for the retention.
func TestCreateKeepsRecordPastTheDelay(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Backends()[1].New(t) // real redis-server
	ctx := context.Background()
	const retention = time.Hour
	const delay = 30 * 24 * time.Hour
	c := NewClient(rdb, WithRetention(retention))
	ttls := func(id string) (time.Duration, time.Duration) {
		rec, err := rdb.TTL(ctx, rkeys.Task(id)).Result()
		require.NoError(t, err)
		hist, err := rdb.TTL(ctx, rkeys.TaskHistory(id)).Result()
		require.NoError(t, err)
		return rec, hist
	}

	_, err := c.Enqueue(ctx, Task{ID: "far", Agent: "tool"}, ProcessIn(delay))
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, []Task{{ID: "far-1", Agent: "tool"}, {ID: "far-2", Agent: "tool"}}, ProcessAt(time.Now().Add(delay)))
	require.NoError(t, err)
	for _, id := range []string{"far", "far-1", "far-2"} {
		rec, hist := ttls(id)
		require.GreaterOrEqual(t, rec, delay+retention-time.Minute, id)
		require.LessOrEqual(t, rec, delay+retention+time.Second, id)
		require.GreaterOrEqual(t, hist, delay+retention-time.Minute, id)
	}

	_, err = c.Enqueue(ctx, Task{ID: "now", Agent: "tool"})
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, []Task{{ID: "now-1", Agent: "tool"}})
	require.NoError(t, err)
	for _, id := range []string{"now", "now-1"} {
		rec, hist := ttls(id)
		require.Greater(t, rec, retention-time.Minute, id)
		require.LessOrEqual(t, rec, retention, id)
		require.LessOrEqual(t, hist, retention, id)
	}
}

// TestClientWithQueues (issue #11 item 15): a client built WithQueues
// refuses a queue outside them (field "queue", the served queues named),
// in Enqueue and EnqueueMany, and accepts a served non-default queue.
func TestClientWithQueues(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Backends()[0].New(t)
	ctx := context.Background()
	c := NewClient(rdb, WithQueues("high", DefaultQueue), WithRetention(time.Hour))
	res, err := c.Enqueue(ctx, Task{ID: "h", Agent: "tool", Queue: "high"})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	_, err = c.Enqueue(ctx, Task{ID: "d", Agent: "tool"})
	require.NoError(t, err, "the default queue is served")

	for _, enqueue := range []func() error{
		func() error { _, err := c.Enqueue(ctx, Task{ID: "l", Agent: "tool", Queue: "low"}); return err },
		func() error {
			_, err := c.EnqueueMany(ctx, []Task{{ID: "m", Agent: "tool", Queue: "high"}, {ID: "l", Agent: "tool", Queue: "low"}})
			return err
		},
	} {
		err := enqueue()
		var ve *ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "queue", ve.Field)
		require.Contains(t, err.Error(), `"low"`)
		require.Contains(t, err.Error(), "served queues: default, high")
	}
	for _, id := range []string{"l", "m"} {
		ok, err := c.Store().Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, id)
	}
	n, err := rdb.Exists(ctx, "asynq:{low}:pending").Result()
	require.NoError(t, err)
	require.Zero(t, n)

	// Without WithQueues any queue is accepted (the Go client does not know the config).
	_, err = NewClient(rdb).Enqueue(ctx, Task{ID: "l", Agent: "tool", Queue: "low"})
	require.NoError(t, err)
}

// TestCloseLeavesRedisOpen: Close, as its doc says, returns nil and leaves
// the caller's rdb open, usable by another client.
func TestCloseLeavesRedisOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	require.NoError(t, NewClient(rdb).Close())
	require.NoError(t, rdb.Ping(ctx).Err(), "Close must not close the caller's rdb")
	res, err := NewClient(rdb).Enqueue(ctx, Task{ID: "after-close", Agent: "tool"})
	require.NoError(t, err)
	require.Equal(t, StatePending, res.State)
}

// delivery is the record's Delivery of env's attempt (as the worker makes it).
func delivery(env *Envelope, attempt int) record.Delivery {
	return record.Delivery{ID: env.ID, Run: env.Run, Restarts: env.Restarts, Attempt: attempt, Seed: env.seed()}
}
