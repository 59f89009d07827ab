package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBudgetErrors: bad budget blocks are errors naming file, line and field.
func TestBudgetErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"per required", "tenants:\n  acme:\n    budget: {tokens: 50000}\n", 3, "tenants.acme.budget.per", "is required"},
		{"per too short", "agents:\n  a:\n    budget: {tokens: 5, per: 10ms}\n", 3, "agents.a.budget.per", "at least 1s"},
		{"negative tokens", "defaults:\n  tenant:\n    budget:\n      tokens: -1\n      per: 1h\n", 4, "defaults.tenant.budget.tokens", "must not be negative"},
		{"negative usd", "agents:\n  a:\n    budget:\n      usd: -2\n      per: 1h\n", 4, "agents.a.budget.usd", "must be between 0"},
		{"no budget", "tenants:\n  acme:\n    budget: {per: 1h}\n", 3, "tenants.acme.budget", "sets no budget"},
		{"unknown field", "tenants:\n  acme:\n    budget:\n      token: 1\n", 4, "tenants.acme.budget.token", "did you mean tokens?"},
		{"fallback without a fallback list", "agents:\n  llm:\n    budget:\n      tokens: 5\n      per: 1h\n      fallback: true\n", 6,
			"agents.llm.budget.fallback", "needs a fallback list: set agents.llm.fallback"},
		{"fallback on a tenant", "tenants:\n  acme:\n    budget:\n      tokens: 5\n      per: 1h\n      fallback: true\n", 6,
			"tenants.acme.budget.fallback", "is for an agent's budget only"},
		{"fallback on defaults.tenant", "defaults:\n  tenant:\n    budget: {tokens: 5, per: 1h, fallback: true}\n", 3,
			"defaults.tenant.budget.fallback", "a fallback agent spends the same tenant budget"},
		{"fallback not a bool", "agents:\n  llm:\n    fallback: [cheap]\n    budget: {tokens: 5, per: 1h, fallback: yes please}\n  cheap: {}\n", 4,
			"agents.llm.budget.fallback", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}

// TestBudgetParsed: the blocks are decoded; a named tenant without a
// budget takes defaults.tenant.budget, one with its own keeps it.
func TestBudgetParsed(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
defaults:
  tenant: {budget: {tokens: 1000, per: 1h}}
tenants:
  acme: {budget: {tokens: 50000, usd: 2.5, per: 1h}}
  globex: {weight: 2}
agents:
  llm:
    budget: {usd: 100, per: 720h}
`), "t.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	require.Equal(t, &Budget{Tokens: 50000, USD: 2.5, Per: time.Hour}, c.TenantBudget("acme"))
	require.Equal(t, &Budget{Tokens: 1000, Per: time.Hour}, c.TenantBudget("globex"))
	require.Equal(t, &Budget{Tokens: 1000, Per: time.Hour}, c.TenantBudget(""))
	a, _ := c.Agent("llm")
	require.Equal(t, &Budget{USD: 100, Per: 720 * time.Hour}, a.Budget)
	require.Equal(t, 2.0, c.Tenants["globex"].Weight)
}

// TestBudgetFallbackParsed: an agent's budget.fallback with a fallback
// list is valid and decoded; false (the default) needs no list.
func TestBudgetFallbackParsed(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
agents:
  llm:
    fallback: [cheap]
    budget: {tokens: 1000, per: 1h, fallback: true}
  cheap:
    budget: {tokens: 5000, per: 1h}
  solo:
    budget: {tokens: 10, per: 1h, fallback: false}
`), "t.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	a, _ := c.Agent("llm")
	require.Equal(t, &Budget{Tokens: 1000, Per: time.Hour, Fallback: true}, a.Budget)
	a, _ = c.Agent("cheap")
	require.False(t, a.Budget.Fallback)
}
