package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestBudgetTenantDefer: a tenant's budget is debited from each call's
// usage; once the window's debits reach it, the tenant's next task is not
// started: it is deferred without an attempt, its history naming the
// budget, while another tenant's task runs.
func TestBudgetTenantDefer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	llm := agent.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		var p struct{ T string }
		_ = json.Unmarshal(r.Params, &p)
		mu.Lock()
		calls[p.T]++
		mu.Unlock()
		return json.RawMessage(`{"ok":true,"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`), nil
	})
	_, rdb := runWorker(t, `
tenants:
  acme: {budget: {tokens: 100, per: 1h}}
agents:
  llm: {}
`, WithAgent("llm", llm))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	enq := func(id, tenant string) string {
		res, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "llm", Tenant: tenant, Params: json.RawMessage(fmt.Sprintf(`{"t":%q}`, tenant))})
		require.NoError(t, err)
		return res.ID
	}
	for i := range 2 {
		id := enq(fmt.Sprintf("acme-%d", i), "acme")
		require.Equal(t, tasks.StateSucceeded, waitTerminal(t, rdb, []string{id}, 10*time.Second)[id].State)
	}
	id := enq("acme-2", "acme")
	v := waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeferred })
	require.Zero(t, v.Attempts, "a budget's deferral uses no attempt")
	ev := lastEvent(v, "deferred")
	require.NotNil(t, ev)
	require.Contains(t, ev.Error, `budget "tenant acme" tokens 100/1h0m0s`)

	other := enq("globex-0", "globex")
	require.Equal(t, tasks.StateSucceeded, waitTerminal(t, rdb, []string{other}, 10*time.Second)[other].State)
	mu.Lock()
	require.Equal(t, map[string]int{"acme": 2, "globex": 1}, calls, "the call over the budget was not made")
	mu.Unlock()

	st, err := budget.New(rdb).Status(ctx, budget.Budget{Kind: budget.Tenant, Name: "acme", Tokens: 100, Per: time.Hour})
	require.NoError(t, err)
	require.EqualValues(t, 120, st.TokensUsed)
	require.True(t, st.Exhausted)
}

// TestBudgetTaskCap: a task's own cap covers all its attempts: each failed
// attempt's usage is added to its record's sum, and once the sum reaches
// max_tokens (or max_cost_usd, priced by the config) the task is
// dead-lettered budget_exhausted before its next attempt, whose call is
// not made.
func TestBudgetTaskCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		task tasks.Task
		want string
	}{
		{"max_tokens", tasks.Task{ID: "capped", Agent: "llm", MaxTokens: 2500}, "max_tokens 2500 (used 3000)"},
		{"max_cost_usd", tasks.Task{ID: "capped", Agent: "llm", MaxCostUSD: 0.25}, "max_cost_usd 0.25 (used 0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			llm := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
				n.Add(1)
				return json.RawMessage(`{"model":"m1","usage":{"prompt_tokens":1000,"completion_tokens":0,"total_tokens":1000}}`),
					&resilience.Failure{Err: errors.New("flaky"), Class: resilience.NetworkTransient}
			})
			_, rdb := runWorker(t, `
defaults:
  retry: {max_attempts: 10, initial_backoff: 10ms, max_backoff: 10ms}
pricing:
  m1: {input_per_mtok: 100, output_per_mtok: 100}
agents:
  llm: {}
`, WithAgent("llm", llm))
			res, err := tasks.NewClient(rdb).Enqueue(context.Background(), tc.task)
			require.NoError(t, err)
			v := waitState(t, rdb, res.ID, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
			require.Equal(t, tasks.StateDeadLettered, v.State)
			require.Equal(t, ReasonBudgetExhausted, v.Reason)
			require.Contains(t, v.Error, tc.want)
			require.EqualValues(t, 3, n.Load(), "the attempt after the cap was reached was not made")
			require.Equal(t, 3, v.Attempts)
		})
	}
}
