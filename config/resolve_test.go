package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAgentResolvesDefaultsOnce: Config.Agent is the one place an agent's
// dependent defaults are applied — the breaker key (the agent's name), the
// limits key (the breaker key) — and Lease is the one hand-off margin.
func TestAgentResolvesDefaultsOnce(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
defaults:
  timeout: 7s
agents:
  plain:
    exec: {command: [/bin/true]}
  keyed:
    exec: {command: [/bin/true]}
    breaker_key: shared
  limited:
    exec: {command: [/bin/true]}
    limits: {requests: 5, per: 1s}
  keyed_limited:
    exec: {command: [/bin/true]}
    breaker_key: prov
    limits: {concurrency: 2}
  own_limit_key:
    exec: {command: [/bin/true]}
    breaker_key: prov2
    limits: {key: pool, concurrency: 2}
`), "resolve.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, breakerKey, limitKey string
		configured                 bool
	}{
		{"plain", "plain", "", true},
		{"keyed", "shared", "", true},
		{"limited", "limited", "limited", true},
		{"keyed_limited", "prov", "prov", true},
		{"own_limit_key", "prov2", "pool", true},
		{"go_func_only", "go_func_only", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := c.Agent(tc.name)
			require.Equal(t, tc.configured, ok)
			require.Equal(t, tc.name, a.Name)
			require.Equal(t, tc.breakerKey, a.BreakerKey)
			if tc.limitKey == "" {
				require.Nil(t, a.Limits)
			} else {
				require.Equal(t, tc.limitKey, a.Limits.Key)
			}
			require.Equal(t, 7*time.Second, a.Timeout)
			require.Equal(t, 12*time.Second, Lease(a.Timeout))
			// Asking twice gives the same answer and shares nothing.
			b, _ := c.Agent(tc.name)
			require.Equal(t, a, b)
		})
	}
}
