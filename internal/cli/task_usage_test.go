package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	agentusage "github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// TestInspectorTaskUsage: `inspector task` shows the task's summed usage
// and cost, and each attempt's tokens in its history (a TOKENS column only
// when some event reported usage); --json carries usage on the task and on
// its events.
func TestInspectorTaskUsage(t *testing.T) {
	t.Parallel()
	rdb, url := redistest.Backends()[1].New(t)
	ctx := context.Background()
	st := record.NewStore(rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	for _, id := range []string{"used", "plain"} {
		ok, err := st.Create(ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		require.True(t, ok)
	}
	d := record.Delivery{ID: "used", Attempt: 1, Seed: seed}
	_, err := st.Apply(ctx, d, record.Retrying(record.Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error",
		Usage: agentusage.Usage{Model: "gpt-4o", InputTokens: 1000, OutputTokens: 50, TotalTokens: 1050, CostUSD: 0.003, Priced: true}}, time.Millisecond, time.Now()))
	require.NoError(t, err)
	d.Attempt = 2
	_, err = st.Apply(ctx, d, record.Succeeded(record.Attempt{Attempt: 2, Agent: "llm",
		Usage: agentusage.Usage{Model: "gpt-4o", InputTokens: 2006, CachedTokens: 1920, OutputTokens: 300, TotalTokens: 2306, CostUSD: 0.005615, Priced: true}}, nil))
	require.NoError(t, err)
	_, err = st.Apply(ctx, record.Delivery{ID: "plain", Attempt: 1, Seed: seed}, record.Succeeded(record.Attempt{Attempt: 1, Agent: "llm"}, nil))
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "used")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Usage:")
	require.Contains(t, out, "3006 input (1920 cached), 350 output, 3356 total tokens, $0.008615")
	require.Contains(t, out, "TOKENS (IN/OUT)")
	require.Contains(t, out, "1000/50 $0.003000")
	// The column's cell is a column of the table, not text with an escaped
	// tab in it (tprintf shows a tab inside an argument as \t), and the
	// ERROR column follows it.
	require.NotContains(t, out, `\t`)
	require.Regexp(t, `retrying +1 +0 +provider_error +1ms +1000/50 \$0\.003000 *\n`, out)
	require.Regexp(t, `queued +0 +0 +- +- *\n`, out)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "used", "--json")
	require.Equal(t, 0, code, errOut)
	var js struct {
		Usage   map[string]any `json:"usage"`
		History []struct {
			Event string         `json:"event"`
			Usage map[string]any `json:"usage"`
		} `json:"history"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	require.Equal(t, 3006.0, js.Usage["input_tokens"])
	require.Equal(t, 350.0, js.Usage["output_tokens"])
	require.Equal(t, 1920.0, js.Usage["cached_tokens"])
	require.Equal(t, 3356.0, js.Usage["total_tokens"])
	require.InDelta(t, 0.008615, js.Usage["cost_usd"], 1e-12)
	last := js.History[len(js.History)-1]
	require.Equal(t, tasks.EventSucceeded, last.Event)
	require.Equal(t, "gpt-4o", last.Usage["model"])

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "plain")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "Usage:")
	require.NotContains(t, out, "TOKENS")
	out, _, _ = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "plain", "--json")
	require.NotContains(t, out, `"usage"`)
}
