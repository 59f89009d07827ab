package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestRunsKeepTenantAndPriority (#28): a task's tenant and priority go
// with every run of it: the restart the worker schedules carries them in
// its payload, the dead letter keeps them, and a requeue of the dead
// letter runs with them (its second dead letter, written from the
// requeued run's envelope, still has them).
func TestRunsKeepTenantAndPriority(t *testing.T) {
	t.Parallel()
	yaml := "worker: {concurrency: 2, shutdown_timeout: 2s}\n" +
		"defaults:\n  retry: {max_attempts: 1}\n  restart: {max_restarts: 1, delays: [1h]}\n" +
		"  circuit_breaker: {failure_threshold: 100}\nagents:\n  r: {}\n  d: {}\n"
	fail := func(status int) agent.Func {
		return agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
			return nil, &resilience.Failure{Status: status, Text: "nope"}
		})
	}
	_, rdb := runWorker(t, yaml, WithAgent("r", fail(503)), WithAgent("d", fail(400)))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "t-r", Agent: "r", Tenant: "team-a", Priority: tasks.PriorityHigh})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "t-d", Agent: "d", Tenant: "team-b", Priority: tasks.PriorityLow})
	require.NoError(t, err)

	// The restart: run 1, scheduled an hour out, with the tenant and priority.
	waitState(t, rdb, "t-r", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateRestarting })
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(tasks.DefaultQueue, "t-r#1")
	require.NoError(t, err)
	env, err := tasks.Decode(info.Payload)
	require.NoError(t, err)
	require.Equal(t, 1, env.Run)
	require.Equal(t, "team-a", env.Tenant)
	require.Equal(t, tasks.PriorityHigh, env.Priority)

	// The dead letter, and the dead letter of its requeued run.
	dlq := deadletter.NewStore(rdb)
	waitState(t, rdb, "t-d", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeadLettered })
	e, err := dlq.Get(ctx, "t-d")
	require.NoError(t, err)
	require.Equal(t, "team-b", e.Tenant)
	require.Equal(t, tasks.PriorityLow, e.Priority)
	_, err = dlq.RequeueTask(ctx, c, "t-d")
	require.NoError(t, err)
	v := waitState(t, rdb, "t-d", 10*time.Second, func(v *tasks.View) bool { return v.Run == 1 && v.State == tasks.StateDeadLettered })
	require.Equal(t, "team-b", v.Tenant)
	require.Equal(t, tasks.PriorityLow, v.Priority)
	e, err = dlq.Get(ctx, "t-d")
	require.NoError(t, err)
	require.Equal(t, 1, e.Run)
	require.Equal(t, "team-b", e.Tenant, "the requeued run carried the tenant")
	require.Equal(t, tasks.PriorityLow, e.Priority)
	require.Equal(t, "low", e.TaskView().Priority)
}
