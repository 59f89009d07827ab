package inspect

import (
	"context"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/usage"
)

// BudgetOf is the config budget b of kind name, named for package budget (nil when b is nil).
func BudgetOf(kind budget.Kind, name string, b *config.Budget) *budget.Budget {
	if b == nil {
		return nil
	}
	return &budget.Budget{Kind: kind, Name: name, Tokens: b.Tokens, USD: b.USD, Per: b.Per}
}

// ConfiguredBudget returns the budget cfg sets for kind name: tenant
// name's (its own block's, or defaults.tenant's) or agent name's; nil when
// cfg sets none. `inspector budget reset` and the console's Reset refuse
// (or, with --force, skip the before-state of) a budget it does not set.
func ConfiguredBudget(cfg *config.Config, kind budget.Kind, name string) *budget.Budget {
	if kind == budget.Tenant {
		return BudgetOf(kind, name, cfg.TenantBudget(name))
	}
	a, _ := cfg.Agent(name)
	return BudgetOf(kind, name, a.Budget)
}

// BudgetsOf returns the budgets a task of agent for tenant counts against, by
// cfg: its tenant's (its own block's, or defaults.tenant's), then its
// agent's.
func BudgetsOf(cfg *config.Config, agent, tenant string) []budget.Budget {
	var out []budget.Budget
	if b := BudgetOf(budget.Tenant, tenant, cfg.TenantBudget(tenant)); b != nil {
		out = append(out, *b)
	}
	if a, _ := cfg.Agent(agent); a.Budget != nil {
		out = append(out, *BudgetOf(budget.Agent, agent, a.Budget))
	}
	return out
}

// Budgets returns every budget cfg sets that can be named: each
// agent's, each named tenant's (its own or defaults.tenant's), the
// default tenant's, and those of tenants (other tenants under
// defaults.tenant.budget, which the config does not list); tenants
// first, each kind sorted by name.
func Budgets(cfg *config.Config, tenants ...string) []budget.Budget {
	names := map[string]bool{}
	for _, n := range cfg.TenantNames() {
		names[n] = true
	}
	for _, n := range tenants {
		names[n] = true
	}
	names[""] = true
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []budget.Budget
	for _, n := range sorted {
		if b := BudgetOf(budget.Tenant, n, cfg.TenantBudget(n)); b != nil {
			out = append(out, *b)
		}
	}
	for _, n := range cfg.AgentNames() {
		if a, _ := cfg.Agent(n); a.Budget != nil {
			out = append(out, *BudgetOf(budget.Agent, n, a.Budget))
		}
	}
	return out
}

// BudgetStatuses reads the state of every budget cfg sets (Budgets(cfg,
// tenants...), in its order) with k: what `inspector budget`, `inspector
// usage` and the console's Budgets page show. One read-only script per
// budget unit.
func BudgetStatuses(ctx context.Context, k *budget.Keeper, cfg *config.Config, tenants ...string) ([]budget.Status, error) {
	var out []budget.Status
	for _, b := range Budgets(cfg, tenants...) {
		st, err := k.Status(ctx, b)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// SpendingTenants returns, sorted, the tenants the config does not name
// whose calls the fleet's usage totals (package usage) count within
// defaults.tenant.budget's window before now (its hours counted whole):
// the tenants that may have spent against that budget, each in a window
// of its own; none when defaults.tenant sets no budget. It costs one
// pipelined read of the window's hours (usage.Read). The totals lag the
// calls by at most the workers' flush, name the default tenant "-" and
// count the tenants beyond an hour's usage.max_series under "other", so a
// caller shows those of them whose budget has debits.
func SpendingTenants(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, now time.Time) ([]string, error) {
	b := cfg.Defaults.Tenant.Budget
	if b == nil {
		return nil, nil
	}
	hours, err := usage.Read(ctx, rdb, now.Add(-b.Per), now)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, h := range hours {
		for s := range h.Series {
			if _, named := cfg.Tenants[s.Tenant]; !named {
				seen[s.Tenant] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// FleetBudgetStatuses is what `inspector budget` and the console's
// Budgets page list: BudgetStatuses over every budget cfg sets, the
// tenants given, and the tenants the config does not name that
// SpendingTenants finds in the usage totals and whose window has debits
// (one found there with none is left out: its budget is untouched).
func FleetBudgetStatuses(ctx context.Context, rdb redis.UniversalClient, k *budget.Keeper, cfg *config.Config, now time.Time, tenants ...string) ([]budget.Status, error) {
	spending, err := SpendingTenants(ctx, rdb, cfg, now)
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, t := range tenants {
		asked[t] = true
	}
	all, err := BudgetStatuses(ctx, k, cfg, append(spending, tenants...)...)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, st := range all {
		if _, named := cfg.Tenants[st.Name]; st.Kind == budget.Tenant && st.Name != "" && !named && !asked[st.Name] &&
			st.TokensUsed == 0 && st.USDUsed == 0 {
			continue // found in the usage totals, but no debit in its window
		}
		out = append(out, st)
	}
	return out, nil
}
