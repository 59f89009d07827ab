package config

import (
	"math"
	"time"
)

// Budget is what the calls of a tenant or of an agent may use within any
// window of Per, all workers together (YAML budget on tenants.NAME,
// defaults.tenant and agents.NAME; see docs/DESIGN.md, "Budgets"). A task
// whose tenant or agent is over its budget is not started: it waits,
// deferred with no attempt used, until the window has room.
type Budget struct {
	// Tokens is the tokens the calls of any window of Per may use, debited
	// after each attempt from its usage. Zero → no token budget.
	Tokens int64 `yaml:"tokens"`
	// USD is the cost in US dollars the calls of any window of Per may
	// use, debited after each attempt whose model has a price. Zero → no
	// cost budget.
	USD float64 `yaml:"usd"`
	// Per is the window of Tokens and USD (e.g. 1h, 720h); required.
	Per time.Duration `yaml:"per"`
	// Fallback, on an agent's budget only, sends the agent's tasks to its
	// fallback agents (Agent.Fallback) while the budget has no room,
	// instead of deferring them: the first whose own budget, breaker and
	// limits admit the call serves it. It needs a fallback list; a
	// tenant's budget cannot set it (a fallback spends the same tenant
	// budget). Zero → over budget, the tasks wait.
	Fallback bool `yaml:"fallback"`
}

// MaxBudgetUSD bounds a budget's usd (it is kept in micro-dollars).
const MaxBudgetUSD = 1e9

// TenantBudget returns tenant's budget: its own block's, or
// defaults.tenant.budget (each tenant then has its own window); nil: none.
func (c *Config) TenantBudget(tenant string) *Budget {
	if t, ok := c.Tenants[tenant]; ok && t.Budget != nil {
		return t.Budget
	}
	return c.Defaults.Tenant.Budget
}

// tenantBudget checks the budget of a tenant (or defaults.tenant) at path.
func (v *validator) tenantBudget(path string, b *Budget) {
	v.budget(path, b)
	if b != nil && b.Fallback {
		v.fail(path+".fallback", "is for an agent's budget only: a fallback agent spends the same tenant budget, so a tenant over its budget waits (set agents.NAME.budget.fallback instead)")
	}
}

// agentBudget checks the budget of the agent name at path; fallback is
// the agent's fallback list.
func (v *validator) agentBudget(path, name string, b *Budget, fallback []string) {
	v.budget(path, b)
	if b != nil && b.Fallback && len(fallback) == 0 {
		v.fail(path+".fallback", "needs a fallback list: set agents.%s.fallback to the agents that serve its tasks while its budget has no room", name)
	}
}

func (v *validator) budget(path string, b *Budget) {
	if b == nil {
		return
	}
	if b.Tokens < 0 {
		v.fail(path+".tokens", "must not be negative, got %d", b.Tokens)
	}
	if b.USD < 0 || b.USD > MaxBudgetUSD || math.IsNaN(b.USD) {
		v.fail(path+".usd", "must be between 0 and %g, got %g", MaxBudgetUSD, b.USD)
	}
	switch {
	case b.Per <= 0:
		v.fail(path+".per", "is required: the window the budget counts in (e.g. 1h), got %s", b.Per)
	case b.Per < time.Second:
		v.fail(path+".per", "must be at least 1s, got %s", b.Per)
	}
	if b.Tokens == 0 && b.USD == 0 {
		v.fail(path, "sets no budget: set tokens or usd")
	}
}
