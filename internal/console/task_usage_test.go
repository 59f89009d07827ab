package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
)

// TestTaskPageShowsUsage: the task page shows the task's summed usage and
// cost, and each attempt's tokens in its history; a task without usage
// shows neither.
func TestTaskPageShowsUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	st := record.NewStore(f.rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	for _, id := range []string{"use-1", "use-2"} {
		ok, err := st.Create(ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, err := st.Apply(ctx, record.Delivery{ID: "use-1", Attempt: 1, Seed: seed}, record.Succeeded(record.Attempt{Attempt: 1, Agent: "llm",
		Usage: usage.Usage{Model: "gpt-4o<x>", InputTokens: 2006, CachedTokens: 1920, OutputTokens: 300, TotalTokens: 2306, CostUSD: 0.005615, Priced: true}}, nil))
	require.NoError(t, err)
	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/use-1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-usage">2006 input (1920 cached), 300 output, 2306 total tokens</dd>`)
	require.Contains(t, r.body, `<dd id="task-cost">$0.005615</dd>`)
	require.Contains(t, r.body, `2006 in / 300 out tokens · $0.005615 · gpt-4o&lt;x&gt;`)
	r = call(t, "GET", f.url+"/ui/tasks/use-2", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.NotContains(t, r.body, `task-usage`)
	require.NotContains(t, r.body, `ev-usage`)
}
