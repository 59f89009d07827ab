package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/usage"
)

// TestFailFastBudget: with fail_if_unavailable, a task whose tenant's
// budget is exhausted is refused 409 budget_exhausted naming the budget
// and when it resets (Retry-After too), nothing enqueued; another tenant's
// task, or one without the flag, is enqueued; max_tokens and max_cost_usd
// are accepted and kept on the task.
func TestFailFastBudget(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Tenants = map[string]config.Tenant{"acme": {Weight: 1, Budget: &config.Budget{Tokens: 1000, Per: time.Hour}}}
	e := setupWith(t, api.Options{}, cfg)
	ctx := context.Background()
	acme := budget.Budget{Kind: budget.Tenant, Name: "acme", Tokens: 1000, Per: time.Hour}
	require.NoError(t, budget.New(e.rdb).Debit(ctx, usage.Usage{TotalTokens: 1000}, acme))

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"b1","agent":"tool","tenant":"acme","fail_if_unavailable":true}`)
	requireError(t, r, 409, api.CodeBudgetExhausted, `budget "tenant acme" tokens 1000/1h0m0s is exhausted until`)
	require.Equal(t, `budget "tenant acme" tokens 1000/1h0m0s`, r.json["budget"])
	require.Equal(t, "acme", r.json["tenant"])
	resets, err := time.Parse(time.RFC3339Nano, r.json["resets_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), resets, 5*time.Minute)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 3600, ra, 300)
	ok, err := e.store.Exists(ctx, "b1")
	require.NoError(t, err)
	require.False(t, ok, "a refused task is not enqueued")

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"fail_if_unavailable":true,"tasks":[{"id":"b2","agent":"tool","tenant":"globex"},{"id":"b3","agent":"tool","tenant":"acme"}]}`)
	requireError(t, r, 409, api.CodeBudgetExhausted, "tasks[1]", "nothing was enqueued")

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"b4","agent":"tool","tenant":"globex","fail_if_unavailable":true}`)
	require.Equal(t, 202, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"b5","agent":"tool","tenant":"acme","max_tokens":5000,"max_cost_usd":0.5}`)
	require.Equal(t, 202, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"b6","agent":"tool","max_tokens":-1}`)
	requireError(t, r, 400, api.CodeInvalidRequest, `"max_tokens"`)
}

// TestAgentsBudget: /api/v1/agents shows an agent's budget: its
// configuration and what its window used and has left.
func TestAgentsBudget(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tool := cfg.Agents["tool"]
	tool.Budget = &config.Budget{Tokens: 5000, Per: time.Hour}
	cfg.Agents["tool"] = tool
	e := setupWith(t, api.Options{}, cfg)
	b := budget.Budget{Kind: budget.Agent, Name: "tool", Tokens: 5000, Per: time.Hour}
	require.NoError(t, budget.New(e.rdb).Debit(context.Background(), usage.Usage{TotalTokens: 1500}, b))

	r := do(t, "GET", e.url+"/api/v1/agents", "", "")
	require.Equal(t, 200, r.status, r.body)
	var got struct {
		Agents []struct {
			Agent  string         `json:"agent"`
			Budget *budget.Status `json:"budget"`
		} `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &got))
	seen := map[string]*budget.Status{}
	for _, a := range got.Agents {
		seen[a.Agent] = a.Budget
	}
	require.Contains(t, seen, "llm")
	require.Nil(t, seen["llm"], "an agent without a budget has none")
	require.NotNil(t, seen["tool"])
	require.EqualValues(t, 5000, seen["tool"].Tokens)
	require.EqualValues(t, 1500, seen["tool"].TokensUsed)
	require.EqualValues(t, 3500, seen["tool"].TokensLeft)
	require.Equal(t, "1h0m0s", seen["tool"].Per)
}

// TestFailFastBudgetFallback: an agent over its own budget with
// budget.fallback is not refused while a fallback agent's budget has room
// (the worker serves the task there); once the fallback's budget is used
// up too, or without budget.fallback, it is refused naming the agent's
// budget; a tenant over its budget is refused whatever the agent's
// fallbacks (they spend the same tenant budget).
func TestFailFastBudgetFallback(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	llm := cfg.Agents["llm"]
	llm.Fallback = []string{"tool"}
	llm.Budget = &config.Budget{Tokens: 1000, Per: time.Hour, Fallback: true}
	cfg.Agents["llm"] = llm
	tool := cfg.Agents["tool"]
	tool.Budget = &config.Budget{Tokens: 500, Per: time.Hour}
	cfg.Agents["tool"] = tool
	cfg.Tenants = map[string]config.Tenant{"acme": {Weight: 1, Budget: &config.Budget{Tokens: 100, Per: time.Hour}}}
	require.NoError(t, cfg.Validate())
	e := setupWith(t, api.Options{}, cfg)
	ctx := context.Background()
	keeper := budget.New(e.rdb)
	b := func(kind budget.Kind, name string, n int64) budget.Budget {
		return budget.Budget{Kind: kind, Name: name, Tokens: n, Per: time.Hour}
	}
	require.NoError(t, keeper.Debit(ctx, usage.Usage{TotalTokens: 1000}, b(budget.Agent, "llm", 1000)))

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"f1","agent":"llm","fail_if_unavailable":true}`)
	require.Equal(t, 202, r.status, "llm is over its budget, but its fallback tool has room: %s", r.body)

	noFallback := *cfg
	noFallback.Agents = map[string]config.Agent{"tool": tool, "llm": llm}
	plain := llm
	plain.Budget = &config.Budget{Tokens: 1000, Per: time.Hour}
	noFallback.Agents["llm"] = plain
	err := api.CheckBudgets(ctx, keeper, &noFallback, "llm", "", time.Now())
	require.ErrorIs(t, err, api.ErrBudgetExhausted, "without budget.fallback the agent's budget refuses")

	require.NoError(t, keeper.Debit(ctx, usage.Usage{TotalTokens: 100}, b(budget.Tenant, "acme", 100)))
	err = api.CheckBudgets(ctx, keeper, cfg, "llm", "acme", time.Now())
	var be *api.BudgetExhaustedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, `budget "tenant acme" tokens 100/1h0m0s`, be.Over.Budget.Text(be.Over.Unit), "a tenant over its budget is refused")

	require.NoError(t, keeper.Debit(ctx, usage.Usage{TotalTokens: 500}, b(budget.Agent, "tool", 500)))
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"f2","agent":"llm","fail_if_unavailable":true}`)
	requireError(t, r, 409, api.CodeBudgetExhausted, `budget "agent llm" tokens 1000/1h0m0s is exhausted until`)
	require.Equal(t, "llm", r.json["agent"])
}
