package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/usage"
)

// TestUsage: GET /api/v1/usage answers the fleet's totals over since,
// grouped by the by parameter, with the hours; bad parameters are 400; it
// requires the token when one is set.
func TestUsage(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: "tok"})
	now := time.Now()
	rec := usage.NewRecorder(e.rdb, usage.RecorderOptions{})
	rec.Add(usage.Entry{Agent: "llm", Tenant: "acme", At: now, Usage: usage.Usage{Model: "m1", InputTokens: 100, OutputTokens: 50, CachedTokens: 20, CostUSD: 0.123456, Priced: true}})
	rec.Add(usage.Entry{Agent: "llm", Tenant: "beta", At: now, Usage: usage.Usage{Model: "m2", InputTokens: 1, OutputTokens: 2}})
	rec.Add(usage.Entry{Agent: "tool", Tenant: "acme", At: now.Add(-5 * time.Hour), Usage: usage.Usage{InputTokens: 9, OutputTokens: 1}})
	require.NoError(t, rec.Flush(context.Background()))

	require.Equal(t, http.StatusUnauthorized, do(t, "GET", e.url+"/api/v1/usage", "", "").status)
	r := do(t, "GET", e.url+"/api/v1/usage", "tok", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "agent", r.json["by"])
	total := r.json["total"].(map[string]any)
	require.EqualValues(t, 163, total["total_tokens"])
	require.EqualValues(t, 3, total["attempts"])
	require.InDelta(t, 0.123456, total["cost_usd"], 1e-9)
	groups := r.json["groups"].([]any)
	require.Len(t, groups, 2)
	first := groups[0].(map[string]any)
	require.Equal(t, "llm", first["key"])
	require.EqualValues(t, 153, first["total_tokens"])
	require.EqualValues(t, 20, first["cached_tokens"])
	require.Len(t, r.json["hours"].([]any), 2)

	r = do(t, "GET", e.url+"/api/v1/usage?by=model&since=1h", "tok", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	keys := map[string]float64{}
	for _, g := range r.json["groups"].([]any) {
		m := g.(map[string]any)
		require.Equal(t, "model", m["by"])
		keys[m["key"].(string)] = m["total_tokens"].(float64)
	}
	require.Equal(t, map[string]float64{"m1": 150, "m2": 3}, keys)
	require.Len(t, r.json["hours"].([]any), 1)

	for _, q := range []string{"by=queue", "since=soon", "since=-1h"} {
		r = do(t, "GET", e.url+"/api/v1/usage?"+q, "tok", "")
		require.Equal(t, http.StatusBadRequest, r.status, q)
		require.Equal(t, "invalid_request", r.json["code"], q)
	}
}
