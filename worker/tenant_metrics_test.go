package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/tasks"
)

// TestTenantTasksCounted: a worker counts each run that ends by tenant and
// outcome: successes of the default tenant, of acme (named in the config)
// and of an unnamed tenant (other), and a dead letter of the default
// tenant.
func TestTenantTasksCounted(t *testing.T) {
	t.Parallel()
	w, rdb := runWorker(t, "worker: {concurrency: 2, shutdown_timeout: 2s}\ntenants:\n  acme: {weight: 3}\nagents:\n  tool: {}\n",
		WithAgent("tool", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(ctx, tasks.Task{ID: "ok", Agent: "tool"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "stray", Agent: "no-such-agent"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "acme-1", Agent: "tool", Tenant: "acme", Priority: tasks.PriorityHigh})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "zed-1", Agent: "tool", Tenant: "zed"})
	require.NoError(t, err)
	views := waitTerminal(t, rdb, []string{"ok", "stray", "acme-1", "zed-1"}, 30*time.Second)
	require.Equal(t, tasks.StateSucceeded, views["ok"].State)
	require.Equal(t, tasks.StateDeadLettered, views["stray"].State)
	require.Eventually(t, func() bool {
		return counterValue(t, w, "agentq_tenant_tasks_total", map[string]string{"tenant": "default", "outcome": "succeeded"}) == 1 &&
			counterValue(t, w, "agentq_tenant_tasks_total", map[string]string{"tenant": "default", "outcome": "dead_lettered"}) == 1 &&
			counterValue(t, w, "agentq_tenant_tasks_total", map[string]string{"tenant": "acme", "outcome": "succeeded"}) == 1 &&
			counterValue(t, w, "agentq_tenant_tasks_total", map[string]string{"tenant": "other", "outcome": "succeeded"}) == 1
	}, 10*time.Second, 10*time.Millisecond)
}
