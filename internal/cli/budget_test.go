package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/redistest"
	agentusage "github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueuerFailIfBudgetExhausted: with the tenant's budget exhausted,
// --fail-if-unavailable (or a line's "fail_if_unavailable": true) exits 3
// naming the budget and when it resets, and enqueues nothing; another
// tenant's task passes; --max-tokens and --max-cost-usd are accepted.
func TestEnqueuerFailIfBudgetExhausted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfgPath := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("tenants:\n  acme: {budget: {tokens: 1000, per: 1h}}\nagents:\n  tool: {}\n"), 0o600))
	acme := budget.Budget{Kind: budget.Tenant, Name: "acme", Tokens: 1000, Per: time.Hour}
	require.NoError(t, budget.New(rdb).Debit(ctx, agentusage.Usage{TotalTokens: 1200}, acme))
	store := tasks.NewStore(rdb)
	exists := func(id string) bool {
		ok, err := store.Exists(ctx, id)
		require.NoError(t, err)
		return ok
	}
	base := []string{"--redis", srv.URL(), "--config", cfgPath}
	for _, tc := range []struct {
		name    string
		stdin   string
		args    []string
		code    int
		outHas  string
		errHas  string
		present bool
		id      string
	}{
		{name: "single refused", args: []string{"--agent", "tool", "--tenant", "acme", "--id", "s1", "--fail-if-unavailable"},
			code: ExitUnavailable, errHas: `budget "tenant acme" tokens 1000/1h0m0s is exhausted until 20`, id: "s1"},
		{name: "single refused json", args: []string{"--agent", "tool", "--tenant", "acme", "--id", "s2", "--fail-if-unavailable", "--json"},
			code: ExitUnavailable, outHas: `"code":"budget_exhausted"`, id: "s2"},
		{name: "file line refused", args: []string{"--file", "-"},
			stdin: `{"id":"f1","agent":"tool","tenant":"acme","fail_if_unavailable":true,"max_tokens":10}` + "\n",
			code:  ExitUnavailable, errHas: "line 1:", id: "f1"},
		{name: "other tenant passes", args: []string{"--agent", "tool", "--tenant", "globex", "--id", "s3", "--fail-if-unavailable",
			"--max-tokens", "5000", "--max-cost-usd", "0.5"},
			code: ExitOK, outHas: "s3", present: true, id: "s3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append(base, tc.args...)...)
			require.Equal(t, tc.code, code, "stdout %s stderr %s", out, errOut)
			require.Contains(t, out, tc.outHas)
			require.Contains(t, errOut, tc.errHas)
			require.Equal(t, tc.present, exists(tc.id))
		})
	}
}

// TestInspectorBudget: inspector budget lists every configured budget with
// what its window used and has left (JSON Lines with --json), inspector
// usage shows them under its totals, and inspector budget reset forgets a
// window (a budget the config does not set is refused without --force).
func TestInspectorBudget(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfgPath := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`tenants:
  acme: {budget: {tokens: 1000, per: 1h}}
agents:
  llm: {budget: {usd: 2, per: 720h}}
`), 0o600))
	acme := budget.Budget{Kind: budget.Tenant, Name: "acme", Tokens: 1000, Per: time.Hour}
	k := budget.New(rdb)
	require.NoError(t, k.Debit(ctx, agentusage.Usage{TotalTokens: 1200}, acme))
	base := []string{"--redis", srv.URL(), "--config", cfgPath}

	out, errOut, code := runCmd(t, NewInspectorCmd, "", append(base, "budget", "--json")...)
	require.Equal(t, ExitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	var st budget.Status
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &st))
	require.Equal(t, budget.Tenant, st.Kind)
	require.Equal(t, "acme", st.Name)
	require.EqualValues(t, 1200, st.TokensUsed)
	require.Zero(t, st.TokensLeft)
	require.True(t, st.Exhausted)
	require.Positive(t, st.ResetsMS)
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &st))
	require.Equal(t, budget.Agent, st.Kind)
	require.Equal(t, 2.0, st.USDLeft)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, "usage")...)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "budgets (inspector budget):")
	require.Contains(t, out, "1200/1000")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, "budget", "reset", "tenant", "globex")...)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--force")
	_, _, code = runCmd(t, NewInspectorCmd, "", append(base, "budget", "reset", "team", "acme")...)
	require.Equal(t, ExitUsage, code)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, "budget", "reset", "tenant", "acme")...)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, `budget tenant "acme" reset`)
	over, err := k.Check(ctx, acme)
	require.NoError(t, err)
	require.Nil(t, over, "the window's debits are forgotten")
}

// TestInspectorBudgetFindsSpendingTenants: inspector budget lists, besides
// the configured budgets, the tenants the config does not name that spent
// against defaults.tenant.budget (found in the usage totals) — beta, with
// debits — but not one found there whose window has none (gamma); --tenant
// shows an untouched one on request.
func TestInspectorBudgetFindsSpendingTenants(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfgPath := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("defaults:\n  tenant: {budget: {tokens: 500, per: 1h}}\nagents:\n  tool: {}\n"), 0o600))
	beta := budget.Budget{Kind: budget.Tenant, Name: "beta", Tokens: 500, Per: time.Hour}
	require.NoError(t, budget.New(rdb).Debit(ctx, agentusage.Usage{TotalTokens: 300}, beta))
	rec := agentusage.NewRecorder(rdb, agentusage.RecorderOptions{})
	for _, tenant := range []string{"beta", "gamma"} {
		rec.Add(agentusage.Entry{Agent: "tool", Tenant: tenant, At: time.Now(), Usage: agentusage.Usage{TotalTokens: 300}})
	}
	require.NoError(t, rec.Flush(ctx))
	base := []string{"--redis", srv.URL(), "--config", cfgPath, "budget", "--json"}

	names := func(args ...string) map[string]budget.Status {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append(base, args...)...)
		require.Equal(t, ExitOK, code, errOut)
		got := map[string]budget.Status{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var st budget.Status
			require.NoError(t, json.Unmarshal([]byte(l), &st), out)
			got[st.Name] = st
		}
		return got
	}
	got := names()
	require.Contains(t, got, "beta")
	require.EqualValues(t, 300, got["beta"].TokensUsed)
	require.EqualValues(t, 200, got["beta"].TokensLeft)
	require.Contains(t, got, "", "the default tenant's budget")
	require.NotContains(t, got, "gamma", "a tenant with no debit in its window")
	require.Contains(t, names("--tenant", "gamma"), "gamma", "asked for by name")
}
