package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestTasksRestartAfterKill (issue #39 item 7, "a restarted run that is
// running read restarting"): a worker records run 0's restart (the record
// moves to run 1, restarting) and is SIGKILLed before asynq's ack, so
// run 0's asynq entry stays in the active list until its lease is
// recovered. The listing follows the record, not the leftover entry: the
// task is listed once, restarting (from the restart index), not also as
// active. When the restarted run (1) starts, it is listed once, active,
// and reads active in Get — even with run 0's entry still leased and the
// restart index still holding the task.
func TestTasksRestartAfterKill(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	_, err := tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "r", Agent: "a"})
	require.NoError(t, err)
	// Worker A takes run 0 from pending; its attempt ends restartable.
	require.NoError(t, rdb.LRem(ctx, broker.PendingKey("default"), 0, "r").Err())
	require.NoError(t, rdb.LPush(ctx, broker.ActiveKey("default"), "r").Err())
	st := record.NewStore(rdb)
	run0 := record.Delivery{ID: "r", Run: 0, Attempt: 1, Worker: "host:1"}
	out, err := st.Apply(ctx, run0, record.Started())
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
	// Its restart: the index entry, run 1 scheduled, the record moved on; then
	// SIGKILL before the ack (run 0 stays leased in the active list).
	require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redisZ(float64(time.Now().Add(time.Minute).UnixMilli()), "r")).Err())
	require.NoError(t, rdb.ZAdd(ctx, broker.ScheduledKey("default"), redisZ(float64(time.Now().Add(time.Minute).Unix()), "r#1")).Err())
	out, err = st.Apply(ctx, run0, record.Restarting(record.Attempt{Attempt: 1, ErrorClass: "network_transient", Error: "down"},
		record.NextRun{Run: 1, Restarts: 1}, time.Minute))
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)

	requireListedOnce(t, rdb, "r", record.StateRestarting, record.StateRestarting)

	// The restart run (1) comes due and starts on worker B; run 0's entry is
	// still leased, and the index entry is left (a slot not yet freed).
	require.NoError(t, rdb.ZRem(ctx, broker.ScheduledKey("default"), "r#1").Err())
	require.NoError(t, rdb.LPush(ctx, broker.ActiveKey("default"), "r#1").Err())
	out, err = st.Apply(ctx, record.Delivery{ID: "r", Run: 1, Restarts: 1, Attempt: 1, Worker: "host:2"}, record.Started())
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
	v, err := st.Get(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, record.StateActive, v.State)
	require.Equal(t, 1, v.Run)
	requireListedOnce(t, rdb, "r", record.StateActive, record.StateActive)
	requireListedOnce(t, rdb, "r", record.StateActive, record.StateActive, record.StateRestarting, record.StateActive)
}

// requireListedOnce lists the tasks in states (all when none) and requires
// task id among them exactly once, listed as as, its record in state st.
func requireListedOnce(t *testing.T, rdb redisClient, id string, as, st record.State, states ...record.State) {
	t.Helper()
	page, err := inspect.Tasks(context.Background(), rdb, inspect.TaskFilter{States: states})
	require.NoError(t, err)
	var got []inspect.ListedTask
	for _, tk := range page.Tasks {
		if tk.ID == id {
			got = append(got, tk)
		}
	}
	require.Len(t, got, 1, "task %s listed %d times: %+v", id, len(got), got)
	require.Equal(t, as, got[0].ListedAs)
	require.Equal(t, st, got[0].State)
}
