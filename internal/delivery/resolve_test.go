package delivery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/inspect"
)

// TestAgentSettingsSameForEveryCaller: the worker runs an agent with the
// breaker key, limits key and leases that config.Config.Agent resolves, and
// the agents view (inspect.AgentRefsOf: the worker's /api/v1/agents, the
// HTTP API's and the console's) and the CLIs' key lists (inspect.BreakerKeys,
// LimitKeys, PauseOnlyKeys) show the same ones, whichever caller asks.
func TestAgentSettingsSameForEveryCaller(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
defaults:
  timeout: 7s
agents:
  plain:
    exec: {command: [/bin/true]}
  keyed:
    exec: {command: [/bin/true]}
    breaker_key: shared
    timeout: 3s
  limited:
    http: {url: "http://127.0.0.1:1/"}
    limits: {requests: 5, per: 1s}
  keyed_limited:
    exec: {command: [/bin/true]}
    breaker_key: prov
    limits: {concurrency: 2}
  pause_only:
    http: {url: "http://127.0.0.1:1/"}
    breaker_key: provider
  own_limit_key:
    exec: {command: [/bin/true]}
    breaker_key: prov2
    limits: {key: pool, concurrency: 2}
    health: {command: [/bin/true]}
`), "resolve.yaml")
	require.NoError(t, err)
	goFunc := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })

	for _, tc := range []struct {
		name, breakerKey, limitKey string
		pauseOnly                  bool
		timeout                    time.Duration
	}{
		// An exec agent without limits is pause-only too: its
		// ActionResponse's retry_after and headers pause its breaker key.
		{name: "plain", breakerKey: "plain", limitKey: "plain", pauseOnly: true, timeout: 7 * time.Second},
		{name: "keyed", breakerKey: "shared", limitKey: "shared", pauseOnly: true, timeout: 3 * time.Second},
		{name: "limited", breakerKey: "limited", limitKey: "limited", timeout: 7 * time.Second},
		{name: "keyed_limited", breakerKey: "prov", limitKey: "prov", timeout: 7 * time.Second},
		{name: "pause_only", breakerKey: "provider", limitKey: "provider", pauseOnly: true, timeout: 7 * time.Second},
		{name: "own_limit_key", breakerKey: "prov2", limitKey: "pool", timeout: 7 * time.Second},
		{name: "go_func_only", breakerKey: "go_func_only", timeout: 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var run agent.Runner
			if tc.name == "go_func_only" {
				run = goFunc
			}
			sp, err := buildSpec(cfg, tc.name, run)
			require.NoError(t, err)
			a, _ := cfg.Agent(tc.name)
			refs := inspect.AgentRefsOf(cfg, []string{tc.name})
			require.Len(t, refs, 1)
			ref := refs[0]

			// The breaker key: the worker's, the config's, the view's.
			require.Equal(t, tc.breakerKey, sp.breakerKey)
			require.Equal(t, tc.breakerKey, a.BreakerKey)
			require.Equal(t, tc.breakerKey, ref.BreakerKey)
			if tc.name != "go_func_only" {
				require.Contains(t, inspect.BreakerKeys(cfg), tc.breakerKey)
			}

			// The hand-off margin: one lease for trials and slots.
			require.Equal(t, tc.timeout+config.LeaseMargin, sp.breaker.TrialLease)
			require.Equal(t, config.Lease(a.Timeout), sp.breaker.TrialLease)

			// The limits key: the worker's, the config's, the view's, the CLI's.
			switch {
			case tc.limitKey == "":
				require.Nil(t, sp.limits)
				require.Nil(t, a.Limits)
				require.Empty(t, ref.LimitKey)
			case tc.pauseOnly:
				require.True(t, sp.limits.pauseOnly)
				require.Equal(t, tc.limitKey, sp.limits.key)
				require.Empty(t, ref.LimitKey, "a pause-only key is not a limits key in the view")
				require.Contains(t, inspect.PauseOnlyKeys(cfg)[tc.limitKey], tc.name)
				require.Contains(t, inspect.LimitKeys(cfg), tc.limitKey)
			default:
				require.False(t, sp.limits.pauseOnly)
				require.Equal(t, tc.limitKey, sp.limits.key)
				require.Equal(t, tc.limitKey, a.Limits.Key)
				require.Equal(t, tc.limitKey, ref.LimitKey)
				require.Equal(t, sp.limits.cfg.Requests, ref.Limits.Requests)
				require.Equal(t, sp.limits.cfg.Concurrency, ref.Limits.Concurrency)
				require.Equal(t, config.Lease(tc.timeout), sp.limits.cfg.Lease)
				require.Contains(t, inspect.LimitKeys(cfg), tc.limitKey)
			}

			// The view's fallbacks and probe are the worker's.
			require.Equal(t, sp.fallbackNames, ref.Fallback)
			require.Equal(t, sp.probed, ref.Probe)
		})
	}
}
