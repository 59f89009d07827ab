package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
)

// TestTenants: GET /api/v1/tenants lists each tenant of each queue with
// its runs waiting in its lanes and in flight, its cap and weight from the
// API's config (acme at its cap of 2); ?queue= keeps one queue; it
// requires the token when one is set.
func TestTenants(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Tenants = map[string]config.Tenant{"acme": {Weight: 3, Concurrency: 2}}
	e := setupWith(t, api.Options{Token: "tok"}, cfg)
	want := brokertest.Seed(t, e.rdb, "default")
	brokertest.Enqueue(t, e.rdb, "other", broker.Lane{Tenant: "zed"}, "zed", 1, time.Now())

	require.Equal(t, http.StatusUnauthorized, do(t, "GET", e.url+"/api/v1/tenants", "", "").status)
	r := do(t, "GET", e.url+"/api/v1/tenants", "tok", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	ts := r.json["tenants"].([]any)
	require.Len(t, ts, 5)
	for i, name := range []string{"", "acme", "beta"} {
		tn := ts[i].(map[string]any)
		require.Equal(t, "default", tn["queue"])
		require.Equal(t, name, tn["tenant"])
		require.EqualValues(t, want[name].Pending, tn["pending"], name)
		require.EqualValues(t, want[name].InFlight, tn["in_flight"], name)
	}
	acme := ts[1].(map[string]any)
	require.EqualValues(t, 2, acme["concurrency"])
	require.EqualValues(t, 3, acme["weight"])
	require.Equal(t, true, acme["capped"])
	at, err := time.Parse(time.RFC3339, acme["oldest_waiting"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(-time.Hour), at, 5*time.Minute)
	require.Equal(t, "zed", ts[4].(map[string]any)["tenant"])

	r = do(t, "GET", e.url+"/api/v1/tenants?queue=other", "tok", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Len(t, r.json["tenants"].([]any), 2)
}
