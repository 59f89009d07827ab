package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/tasks"
)

// agentLabels are the distinct values of the agent-valued labels (agent,
// fallback) across w's series.
func agentLabels(t *testing.T, w *Worker) map[string]bool {
	t.Helper()
	mfs, err := w.metrics.reg.Gather()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "agent" || lp.GetName() == "fallback" {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}

// TestUnknownAgentsShareOneLabel (#23 item 10): tasks for 50 agent names
// the worker does not run (first runs, a restart run, a payload that fails
// its checks) are dead-lettered, and every series about them is labelled
// agent="_unknown": the worker's series stay bounded by its config,
// whatever names producers choose.
func TestUnknownAgentsShareOneLabel(t *testing.T) {
	t.Parallel()
	w, rdb := runWorker(t, "worker: {concurrency: 4, shutdown_timeout: 2s}\nagents:\n  tool: {}\n",
		WithAgent("tool", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	var ids []string
	for i := range 50 {
		id := fmt.Sprintf("stray-%d", i)
		name := fmt.Sprintf("agent-%d-%x", i, rand.Uint64())
		if i == 0 {
			// A restart run of a task whose agent is unknown here.
			require.NoError(t, c.EnqueueRun(ctx, &tasks.Envelope{ID: id, Agent: name, Queue: tasks.DefaultQueue, Run: 1, Restarts: 1}, 0))
		} else {
			_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: name, Params: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}
		ids = append(ids, id)
	}
	// A payload that decodes but fails its checks, naming yet another agent.
	_, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask(tasks.TypeName,
		[]byte(fmt.Sprintf(`{"id":"","agent":"agent-garbled-%x"}`, rand.Uint64()))), asynq.TaskID("garbled-stray"), asynq.MaxRetry(1<<30))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "known", Agent: "tool"})
	require.NoError(t, err)

	views := waitTerminal(t, rdb, append(ids, "known"), 30*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateDeadLettered, views[id].State, id)
	}
	dlq := deadletter.NewStore(rdb)
	require.Eventually(t, func() bool { _, err := dlq.Get(ctx, "garbled-stray"); return err == nil }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return counterValue(t, w, "agentq_dead_letters_total", map[string]string{"agent": UnknownAgentLabel}) == 51
	}, 10*time.Second, 10*time.Millisecond, "every stray task is counted under %s", UnknownAgentLabel)
	require.Equal(t, 1.0, counterValue(t, w, "agentq_restart_outcomes_total", map[string]string{"agent": UnknownAgentLabel, "outcome": "dead_lettered"}))

	labels := agentLabels(t, w)
	require.Equal(t, map[string]bool{"tool": true, UnknownAgentLabel: true}, labels,
		"only the configured agents and %s label series", UnknownAgentLabel)
}
