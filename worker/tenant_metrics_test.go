package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/tasks"
)

// TestTenantLabelsAreBounded: the tenant label of agentq_tenant_tasks_total
// is a configured tenant's name, "default" for the default tenant and
// "other" for any other name: a thousand tenants make three series per
// outcome, not a thousand.
func TestTenantLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.tenants = broker.FairConfig{Named: map[string]broker.TenantSettings{"acme": {Weight: 3}}}
	names := []string{"acme", ""}
	for i := range 1000 {
		names = append(names, fmt.Sprintf("customer-%d", i))
	}
	for _, n := range names {
		m.tenantTasks.WithLabelValues(m.tenant(n), "succeeded").Inc()
	}
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "agentq_tenant_tasks_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "tenant" {
					got[lp.GetValue()] += s.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, map[string]float64{"acme": 1, "default": 1, "other": 1000}, got)
}

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
