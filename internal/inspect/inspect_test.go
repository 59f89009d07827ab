package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

func TestCollect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()

	st, bl, err := inspect.Collect(ctx, rdb, nil)
	require.NoError(t, err)
	require.Empty(t, st.Queues)
	require.Zero(t, st.DeadLetters)
	require.Empty(t, bl)

	_, err = tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "t1", Agent: "llm"})
	require.NoError(t, err)
	_, err = tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "t2", Agent: "llm"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	dlq := deadletter.NewStore(rdb)
	for _, e := range []*deadletter.Entry{{ID: "d1", Agent: "llm", ErrorClass: "timeout"}, {ID: "d2", Agent: "tool", ErrorClass: "timeout"}} {
		_, err := dlq.Put(ctx, e)
		require.NoError(t, err)
	}
	require.NoError(t, breaker.New(rdb).Trip(ctx, "llm.example", time.Minute))

	st, bl, err = inspect.Collect(ctx, rdb, nil)
	require.NoError(t, err)
	require.Len(t, st.Queues, 1)
	require.Equal(t, inspect.QueueStats{Queue: "default", Pending: 1, Tenants: 1, Scheduled: 1}, st.Queues[0])
	require.EqualValues(t, 2, st.DeadLetters)
	require.Equal(t, map[string]int64{"llm": 1, "tool": 1}, st.DeadLetterAgent)
	require.Equal(t, map[string]int64{"timeout": 2}, st.DeadLetterClass)
	require.Equal(t, 1, st.Breakers)
	require.Equal(t, 1, st.BreakersOpen)
	require.Len(t, bl, 1)
	require.Equal(t, "llm.example", bl[0].Key)
}

func TestAgentRefs(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Agents = map[string]config.Agent{
		"b": {Name: "b", Settings: cfg.Defaults.Clone()},
		"a": {Name: "a", BreakerKey: "shared", Fallback: []string{"b"}, Health: &config.HealthProbe{URL: "http://127.0.0.1:1/"}, Settings: cfg.Defaults.Clone()},
	}
	refs := inspect.AgentRefs(cfg)
	require.Len(t, refs, 2)
	require.Equal(t, inspect.AgentRef{Name: "a", BreakerKey: "shared", Fallback: []string{"b"}, Probe: true}, refs[0])
	require.Equal(t, "b", refs[1].Name)
	require.Equal(t, "b", refs[1].BreakerKey, "an agent without breaker_key uses its name")
	require.False(t, refs[1].Probe)
}
