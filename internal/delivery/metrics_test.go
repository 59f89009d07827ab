package delivery

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
)

// TestTenantLabelsAreBounded: the tenant label of agentq_tenant_tasks_total
// is a configured tenant's name, "default" for the default tenant and
// "other" for any other name: a thousand tenants make three series per
// outcome, not a thousand.
func TestTenantLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry(), nil, broker.FairConfig{})
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
