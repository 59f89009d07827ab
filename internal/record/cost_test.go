package record

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/usage"
)

// TestScriptCost (RECORD_COST=1): Redis CPU per call of the record's writes.
func TestScriptCost(t *testing.T) {
	if os.Getenv("RECORD_COST") == "" {
		t.Skip("RECORD_COST=1 to measure")
	}
	srv := redistest.Start(t)
	rdb := srv.Client()
	st := NewStore(rdb)
	ctx := context.Background()
	const n = 20000
	for i := range n {
		_, err := st.Create(ctx, New{ID: fmt.Sprint("t", i), Seed: seed(), State: StatePending})
		require.NoError(t, err)
	}
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for i := range n {
		_, err := st.Apply(ctx, Delivery{ID: fmt.Sprint("t", i), Attempt: 1}, Succeeded(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1"}, nil))
		require.NoError(t, err)
	}
	logStats(t, rdb, "no webhooks")
	// A task that names webhooks: its outcome also goes in its outbox and
	// the due set, in the same script.
	hooked := seed()
	hooked.Notify = []string{"results"}
	for i := range n {
		_, err := st.Create(ctx, New{ID: fmt.Sprint("h", i), Seed: hooked, State: StatePending})
		require.NoError(t, err)
	}
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for i := range n {
		_, err := st.Apply(ctx, Delivery{ID: fmt.Sprint("h", i), Attempt: 1, Seed: hooked}, Succeeded(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1"}, nil))
		require.NoError(t, err)
	}
	logStats(t, rdb, "notify: [results]")
	// An attempt that reported usage: its sum's HINCRBYs in the same script.
	for i := range n {
		_, err := st.Create(ctx, New{ID: fmt.Sprint("u", i), Seed: seed(), State: StatePending})
		require.NoError(t, err)
	}
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	used := usage.Usage{Model: "gpt-4o", InputTokens: 1200, OutputTokens: 80, CachedTokens: 1024, TotalTokens: 1280, CostUSD: 0.00124, Priced: true}
	for i := range n {
		_, err := st.Apply(ctx, Delivery{ID: fmt.Sprint("u", i), Attempt: 1}, Succeeded(Attempt{Attempt: 1, Agent: "llm", Worker: "w:1", Usage: used}, nil))
		require.NoError(t, err)
	}
	logStats(t, rdb, "usage")
}

func logStats(t *testing.T, rdb *redis.Client, what string) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "cmdstat_") {
			t.Log(what+": ", l)
		}
	}
}
