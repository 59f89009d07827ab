package children

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestRepair: a parent whose spawn a crash cut gets its children from the
// repair; children that ended unheard are reported, which resumes the
// parent (its run made pending) once; a parent no longer waiting leaves
// the index; parents not due yet are left alone.
func TestRepair(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	rec := record.NewStore(rdb)
	now := time.Now()
	r := New(rdb, c, rec, Options{Now: func() time.Time { return now }})

	_, err := c.Enqueue(ctx, tasks.Task{ID: "P", Agent: "boss"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	env := &tasks.Envelope{ID: "P", Agent: "boss", Queue: tasks.DefaultQueue, Run: 1, EnqueuedAt: now.UTC()}
	require.NoError(t, c.EnqueueRun(ctx, env, time.Hour))
	_, err = c.PrepareChildren(ctx, env, 1, record.ModeAll, []tasks.ChildSpec{{Agent: "w"}, {Agent: "w", Name: "b"}})
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, rkeys.Task("P"), record.FieldState, "waiting", record.FieldRun, 1).Err())

	n, err := r.Repair(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not due yet")

	now = now.Add(record.ChildRepairAfter + time.Second)
	n, err = r.Repair(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, id := range []string{"P.1", "P.b"} {
		v, err := c.Store().Get(ctx, id)
		require.NoError(t, err, "the repair spawned %s", id)
		require.Equal(t, "P", v.Parent)
	}

	// Both children end, and a crash cuts their reports.
	require.NoError(t, rdb.HSet(ctx, rkeys.Task("P.1"), record.FieldState, "succeeded", record.FieldResult, `7`).Err())
	require.NoError(t, rdb.HSet(ctx, rkeys.Task("P.b"), record.FieldState, "dead_lettered", record.FieldErrorClass, "logic_error").Err())
	now = now.Add(RepairInterval)
	_, err = r.Repair(ctx)
	require.NoError(t, err)
	ends, err := rec.ChildEnds(ctx, "P")
	require.NoError(t, err)
	require.True(t, ends[0].Recorded && ends[1].Recorded)
	require.JSONEq(t, `7`, string(ends[0].Result))
	require.Equal(t, "logic_error", ends[1].ErrorClass)
	_, err = rdb.ZScore(ctx, broker.ScheduledKey(tasks.DefaultQueue), "P#1").Result()
	require.Error(t, err, "the parent's run is pending")

	require.NoError(t, rdb.HSet(ctx, rkeys.Task("P"), record.FieldState, "active").Err())
	now = now.Add(RepairInterval)
	_, err = r.Repair(ctx)
	require.NoError(t, err)
	_, err = rdb.ZScore(ctx, rkeys.WaitingChildren(), "P").Result()
	require.Error(t, err, "no longer waiting: out of the index")
}
