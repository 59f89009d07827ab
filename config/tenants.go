package config

import (
	"sort"

	"github.com/agentq/agentq/tasks"
)

// Tenant is one tenant's dispatch settings (YAML tenants.NAME and
// defaults.tenant; see docs/DESIGN.md, "Tenants").
type Tenant struct {
	// Weight is the tenant's share of the dispatches of a queue while other
	// tenants have work there too: a tenant of weight 3 is served three
	// times as often as one of weight 1. Zero → defaults.tenant.weight (1).
	Weight float64 `yaml:"weight"`
	// Concurrency caps the tenant's runs in flight on a queue, across the
	// whole fleet; a tenant at its cap holds no worker slot while it waits.
	// Zero → no cap (in tenants.NAME too, whatever defaults.tenant says).
	Concurrency int `yaml:"concurrency"`
	// Budget is what the tenant's calls may use per window, fleet-wide
	// (budget.go). Zero → defaults.tenant.budget for a named tenant; none
	// when that is zero too.
	Budget *Budget `yaml:"budget"`
}

// TenantNames returns the names of the configured tenants, sorted.
func (c *Config) TenantNames() []string {
	names := make([]string, 0, len(c.Tenants))
	for n := range c.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (v *validator) tenants() {
	if v.c.Defaults.Tenant.Weight == 0 {
		v.fail("defaults.tenant.weight", "must be greater than 0 (a tenant's share of the dispatches)")
	}
	v.tenant("defaults.tenant", v.c.Defaults.Tenant)
	for _, name := range v.c.TenantNames() {
		path := join("tenants", name)
		if name == "" {
			v.fail(path, "a tenant's name must not be empty (the default tenant takes defaults.tenant)")
		} else if err := tasks.CheckTenant(name); err != nil {
			v.fail(path, "invalid tenant name: %s", err)
		}
		v.tenant(path, v.c.Tenants[name])
	}
}

func (v *validator) tenant(path string, t Tenant) {
	// An absent weight is 0 and takes defaults.tenant.weight; a 0 written
	// in the file is taken literally, as every written value is, and
	// refused (it would silently mean the default's share); defaults.tenant
	// has its own check above.
	if t.Weight < 0 || t.Weight > 1000 || (t.Weight == 0 && path != "defaults.tenant" && hasLine(v.c.lines, path+".weight")) {
		v.fail(path+".weight", "must be greater than 0 and at most 1000, got %g", t.Weight)
	}
	if t.Concurrency < 0 {
		v.fail(path+".concurrency", "must not be negative (0: no cap), got %d", t.Concurrency)
	}
	v.tenantBudget(path+".budget", t.Budget)
}
