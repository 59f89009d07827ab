package console

import (
	"context"
	"net/http"
	"strings"
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

// TestTaskPageShowsSteps (#37): the task page shows how many steps the task
// recorded and each step event with its name, size and usage; a task
// without steps shows no count.
func TestTaskPageShowsSteps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	st := record.NewStore(f.rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	for _, id := range []string{"steps-1", "steps-2"} {
		ok, err := st.Create(ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		require.True(t, ok)
	}
	d := record.Delivery{ID: "steps-1", Attempt: 1, Seed: seed}
	_, err := st.Apply(ctx, d, record.Started())
	require.NoError(t, err)
	for i, s := range []record.Step{
		{Name: "plan<1>", Data: []byte(`"outline"`), Usage: usage.Usage{InputTokens: 70, OutputTokens: 30, TotalTokens: 100}},
		{Name: "search", Data: []byte(`{"hits":3}`), Usage: usage.Usage{TotalTokens: 40}},
		{Name: "tool", Data: []byte(`null`)},
	} {
		recorded, err := st.Step(ctx, d, s)
		require.NoError(t, err, i)
		require.True(t, recorded, i)
	}
	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/steps-1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-steps">3</dd>`)
	require.Contains(t, r.body, `<span class="meta ev-name">plan&lt;1&gt;</span>`)
	require.Contains(t, r.body, `<span class="meta ev-bytes">9 B</span>`)
	require.Contains(t, r.body, `<span class="meta ev-usage">70 in / 30 out tokens</span>`)
	require.Contains(t, r.body, `<span class="meta ev-name">search</span>`)
	require.Contains(t, r.body, `<span class="meta ev-usage">40 tokens</span>`, "a usage of total tokens only shows the total")
	require.Contains(t, r.body, `<span class="meta ev-name">tool</span>`)
	require.Equal(t, 3, strings.Count(r.body, `ev-step"`), "three step events")
	r = call(t, "GET", f.url+"/ui/tasks/steps-2", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.NotContains(t, r.body, `task-steps`)
	require.NotContains(t, r.body, `ev-name`)
}
