package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// TestHugeUsageExec: the attack end to end, through a real exec
// agent whose replies report absurd usage. A count ≥ 2^63 (once read as
// 0 tokens, so never debited) is debited as usage.MaxTokens and exhausts
// the tenant's budget: its next task is deferred, not run. A tenant whose
// series reports 9e18 input tokens twice has its task's cost_usd at
// usage.MaxCostUSD (it overflowed to -9223372036.85) and its totals count
// two attempts of MaxTokens; another tenant's plain usage is counted
// exactly once in the fleet's totals.
func TestHugeUsageExec(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "github.com/agentq/agentq/internal/testagent")
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 2s}
agents:
  prog: {exec: {command: [%q, echo]}}
tenants:
  acme: {budget: {tokens: 1000000, per: 1h}}
pricing:
  m: {input_per_mtok: 2.5, output_per_mtok: 10}
`, bin))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	run := func(id, tenant, used string) *tasks.View {
		t.Helper()
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "prog", Tenant: tenant,
			Params: json.RawMessage(`{"model":"m","usage":` + used + `}`)})
		require.NoError(t, err)
		return waitState(t, rdb, id, 30*time.Second, func(v *tasks.View) bool {
			return v.State.Terminal() || v.State == tasks.StateDeferred
		})
	}

	v := run("acme-1", "acme", `{"input_tokens": 1e19}`)
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.NotNil(t, v.Usage, "a count ≥ 2^63 is usage, not none")
	require.Equal(t, usage.MaxTokens, v.Usage.InputTokens)
	st, err := budget.New(rdb).Status(ctx, budget.Budget{Kind: budget.Tenant, Name: "acme", Tokens: 1000000, Per: time.Hour})
	require.NoError(t, err)
	require.Equal(t, usage.MaxTokens, st.TokensUsed, "debited as clamped")
	require.True(t, st.Exhausted)
	v = run("acme-2", "acme", `{"input_tokens": 10}`)
	require.Equal(t, tasks.StateDeferred, v.State, "the absurd report exhausted the budget")

	for i := range 2 {
		v = run(fmt.Sprintf("globex-%d", i), "globex", `{"input_tokens": 9000000000000000000}`)
		require.Equal(t, tasks.StateSucceeded, v.State)
		require.Equal(t, usage.MaxTokens, v.Usage.InputTokens)
		require.Equal(t, usage.MaxCostUSD, v.Usage.CostUSD, "cost clamped, not overflowed")
	}
	require.Equal(t, tasks.StateSucceeded, run("small-1", "small", `{"input_tokens": 100, "output_tokens": 10}`).State)

	want := map[string]usage.Counts{
		"acme":   {InputTokens: usage.MaxTokens, TotalTokens: usage.MaxTokens, CostMicroUSD: usage.MicroUSD(usage.MaxCostUSD), Attempts: 1},
		"globex": {InputTokens: 2 * usage.MaxTokens, TotalTokens: 2 * usage.MaxTokens, CostMicroUSD: 2 * usage.MicroUSD(usage.MaxCostUSD), Attempts: 2},
		"small":  {InputTokens: 100, OutputTokens: 10, TotalTokens: 110, CostMicroUSD: 350, Attempts: 1},
	}
	var got map[string]usage.Counts
	deadline := time.Now().Add(60 * time.Second)
	for { // the worker's recorder flushes every usage.DefaultFlushEvery
		r, err := usage.Summarize(ctx, rdb, "tenant", time.Hour, time.Now())
		require.NoError(t, err)
		got = map[string]usage.Counts{}
		for _, g := range r.Groups {
			g.CostUSD = 0
			got[g.Key] = g.Counts
		}
		if len(got) == len(want) && got["small"].Attempts == 1 && got["globex"].Attempts == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, want, got)
}
