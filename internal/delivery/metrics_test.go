package delivery

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
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

// TestBreakerStateIsAnEnum: agentq_breaker_state has one series per key
// and state, 1 for the state last seen and 0 for the others, as a breaker
// moves closed → open → half_open → closed; a state the breaker package
// does not name reads closed.
func TestBreakerStateIsAnEnum(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry(), nil, broker.FairConfig{})
	states := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range gather(t, m, "agentq_breaker_state") {
			out[label(s, "key")+" "+label(s, "state")] = s.GetGauge().GetValue()
		}
		return out
	}
	require.Empty(t, states(), "no key seen yet: no series")
	for _, st := range []breaker.State{breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen, "", breaker.StateOpen} {
		m.SetBreakerState("llm", st)
		want := map[string]float64{"llm closed": 0, "llm half_open": 0, "llm open": 0}
		if st == "" {
			st = breaker.StateClosed
		}
		want["llm "+string(st)] = 1
		require.Equal(t, want, states(), "after %q", st)
	}
	m.SetBreakerState("tool", breaker.StateClosed)
	require.Len(t, states(), 6, "three series per key")
}

// TestCostCountsNanoDollars: agentq_cost_usd_total adds integer
// nano-dollars and divides once when scraped: ten thousand calls of a
// tenth of a cent read exactly 10 dollars (a float sum reads
// 9.999999999999831), and the text exposition says 10.
func TestCostCountsNanoDollars(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry(), nil, broker.FairConfig{})
	float := 0.0
	for range 10000 {
		m.cost.Add(0.001, "llm", "default", "gpt-4o")
		float += 0.001
	}
	m.cost.Add(0.008615, "llm", "acme", "gpt-4o")
	require.NotEqual(t, 10.0, float, "the float sum this counter avoids is noisy")
	got := map[string]float64{}
	for _, s := range gather(t, m, "agentq_cost_usd_total") {
		got[label(s, "tenant")] = s.GetCounter().GetValue()
	}
	require.Equal(t, map[string]float64{"default": 10, "acme": 0.008615}, got)

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), `agentq_cost_usd_total{agent="llm",model="gpt-4o",tenant="default"} 10`+"\n")
	require.Contains(t, rec.Body.String(), `agentq_cost_usd_total{agent="llm",model="gpt-4o",tenant="acme"} 0.008615`+"\n")
}

// gather is the series of family name in m's registry.
func gather(t *testing.T, m *Metrics, name string) []*dto.Metric {
	t.Helper()
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// label is s's value of label name.
func label(s *dto.Metric, name string) string {
	for _, lp := range s.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
