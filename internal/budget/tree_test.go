package budget

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

// TestTreeSpent: a tree's spending is the root's own usage sum plus its
// descendants' debits (tokens; dollars when priced), which live
// TreeUsageLife after the last.
func TestTreeSpent(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	sp, err := s.k.TreeSpent(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, Spent{}, sp)
	require.NoError(t, s.rdb.HSet(ctx, rkeys.Task("r"), record.FieldUsage, "800,200,0,1000,20000000").Err())
	require.NoError(t, s.k.DebitTree(ctx, "r", usage.Usage{TotalTokens: 300, CostUSD: 0.5, Priced: true}))
	require.NoError(t, s.k.DebitTree(ctx, "r", usage.Usage{InputTokens: 50, OutputTokens: 50, CostUSD: 9}))
	sp, err = s.k.TreeSpent(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, int64(1400), sp.Tokens)
	require.InDelta(t, 0.52, sp.USD, 1e-9, "the unpriced debit adds no dollars")
	ttl, err := s.rdb.TTL(ctx, rkeys.TaskTreeUsage("r")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, TreeUsageLife/2)
}
