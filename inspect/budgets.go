package inspect

import (
	"sort"

	"github.com/agentq/agentq/budget"
	"github.com/agentq/agentq/config"
)

// BudgetOf is the config budget b of kind name, named for package budget (nil when b is nil).
func BudgetOf(kind budget.Kind, name string, b *config.Budget) *budget.Budget {
	if b == nil {
		return nil
	}
	return &budget.Budget{Kind: kind, Name: name, Tokens: b.Tokens, USD: b.USD, Per: b.Per}
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
