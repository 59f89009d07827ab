package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	totals "github.com/agentq/agentq/internal/usage"
)

// TestInspectorUsage: `inspector usage` groups the fleet's totals by agent
// (the default), tenant or model over --since, as JSON Lines (exact tokens,
// cost to the micro-dollar) and as a table; a bad --by is bad usage.
func TestInspectorUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	rec := totals.NewRecorder(b.rdb.(redis.UniversalClient), totals.RecorderOptions{})
	add := func(agent, tenant, model string, in, out int64, cost float64, at time.Time) {
		rec.Add(totals.Entry{Agent: agent, Tenant: tenant, At: at,
			Usage: totals.Usage{Model: model, InputTokens: in, OutputTokens: out, CostUSD: cost, Priced: cost > 0}})
	}
	add("llm", "acme", "gpt-x", 1000, 200, 0.004561, now)
	add("llm", "beta", "gpt-x", 10, 20, 0.000001, now)
	add("tool", "acme", "", 5, 5, 0, now)
	add("llm", "acme", "gpt-x", 7, 7, 1, now.Add(-3*time.Hour)) // outside --since 1h
	require.NoError(t, rec.Flush(context.Background()))

	groups := func(args ...string) map[string]map[string]any {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append([]string{"--redis", b.url, "usage", "--json"}, args...)...)
		require.Equal(t, 0, code, errOut)
		got := map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			got[m["key"].(string)] = m
		}
		return got
	}
	g := groups("--since", "1h")
	require.Len(t, g, 2)
	require.Equal(t, "agent", g["llm"]["by"])
	require.EqualValues(t, 1010, g["llm"]["input_tokens"])
	require.EqualValues(t, 220, g["llm"]["output_tokens"])
	require.EqualValues(t, 1230, g["llm"]["total_tokens"])
	require.EqualValues(t, 0, g["llm"]["cached_tokens"])
	require.EqualValues(t, 2, g["llm"]["attempts"])
	require.InDelta(t, 0.004562, g["llm"]["cost_usd"], 1e-9)
	g = groups("--by", "tenant", "--since", "1h")
	require.EqualValues(t, 1210, g["acme"]["total_tokens"])
	require.EqualValues(t, 30, g["beta"]["total_tokens"])
	g = groups("--by", "model") // default --since 24h: the older hour too
	require.EqualValues(t, 1244, g["gpt-x"]["total_tokens"])
	require.EqualValues(t, 10, g["-"]["total_tokens"], "no model named")

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "usage", "--since", "1h")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "COST USD")
	require.Contains(t, out, "0.004562")
	require.Contains(t, out, "tool")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "usage", "--by", "queue")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--by")
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "usage", "--since", "0s")
	require.Equal(t, ExitUsage, code)
}
