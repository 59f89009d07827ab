package budget

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/usage"
)

type setup struct {
	k   *Keeper
	rdb redis.UniversalClient
	mu  sync.Mutex
	now time.Time
}

func newSetup(t *testing.T) *setup {
	s := &setup{now: time.UnixMilli(1_700_000_000_000)}
	rdb := redistest.Start(t).Client()
	s.rdb = rdb
	s.k = New(rdb, limit.WithClock(func() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.now }))
	return s
}

func (s *setup) advance(d time.Duration) { s.mu.Lock(); s.now = s.now.Add(d); s.mu.Unlock() }

// TestBudgetLabel: a budget's text names it; the default tenant's as
// "(default)", not by an empty name (history once said budget "tenant ").
func TestBudgetLabel(t *testing.T) {
	t.Parallel()
	b := Budget{Kind: Tenant, Name: "", Tokens: 1300, Per: time.Hour}
	require.Equal(t, `budget "tenant (default)" tokens 1300/1h0m0s`, b.Text(Tokens))
	b.Name = "acme"
	require.Equal(t, `budget "tenant acme" tokens 1300/1h0m0s`, b.Text(Tokens))
	a := Budget{Kind: Agent, Name: "llm", USD: 300, Per: 720 * time.Hour}
	require.Equal(t, `budget "agent llm" usd 300/720h0m0s`, a.Text(USD))
}

// TestBudgetWindow: a budget refuses once the window's debits reach it,
// names itself and when it has room again, and has room once the debits
// leave the window; tenants' windows are their own.
func TestBudgetWindow(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	acme := Budget{Kind: Tenant, Name: "acme", Tokens: 1000, Per: time.Hour}
	globex := Budget{Kind: Tenant, Name: "globex", Tokens: 1000, Per: time.Hour}
	for range 3 {
		over, err := s.k.Check(ctx, acme)
		require.NoError(t, err)
		require.Nil(t, over)
		require.NoError(t, s.k.Debit(ctx, usage.Usage{TotalTokens: 400}, acme))
		s.advance(time.Minute)
	}
	over, err := s.k.Check(ctx, globex, acme)
	require.NoError(t, err)
	require.NotNil(t, over)
	require.ErrorIs(t, over, ErrExhausted)
	require.Equal(t, acme, over.Budget)
	require.Equal(t, Tokens, over.Unit)
	require.Equal(t, 57*time.Minute, over.ResetsIn) // the first debit leaves the window
	require.Contains(t, over.Error(), `budget "tenant acme" tokens 1000/1h0m0s exhausted`)

	st, err := s.k.Status(ctx, acme)
	require.NoError(t, err)
	require.Equal(t, int64(1200), st.TokensUsed)
	require.Equal(t, int64(0), st.TokensLeft)
	require.True(t, st.Exhausted)

	s.advance(57 * time.Minute)
	over, err = s.k.Check(ctx, acme)
	require.NoError(t, err)
	require.Nil(t, over, "the first debit left the window: 800 < 1000")
}

// TestBudgetUSD: the cost unit debits priced attempts only, in
// micro-dollars, and a reset forgets the window.
func TestBudgetUSD(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	b := Budget{Kind: Agent, Name: "llm", USD: 0.5, Per: time.Hour}
	require.NoError(t, s.k.Debit(ctx, usage.Usage{TotalTokens: 1e6}, b)) // unpriced: no cost
	over, err := s.k.Check(ctx, b)
	require.NoError(t, err)
	require.Nil(t, over)
	require.NoError(t, s.k.Debit(ctx, usage.Usage{TotalTokens: 10, CostUSD: 0.25, Priced: true}, b))
	require.NoError(t, s.k.Debit(ctx, usage.Usage{TotalTokens: 10, CostUSD: 0.25, Priced: true}, b))
	over, err = s.k.Check(ctx, b)
	require.NoError(t, err)
	require.NotNil(t, over)
	require.Equal(t, USD, over.Unit)
	st, err := s.k.Status(ctx, b)
	require.NoError(t, err)
	require.InDelta(t, 0.5, st.USDUsed, 1e-9)

	require.NoError(t, s.k.Reset(ctx, Agent, "llm"))
	over, err = s.k.Check(ctx, b)
	require.NoError(t, err)
	require.Nil(t, over)
}

// TestTaskSpent: a task's usage sum is read from its record, and its cap
// is reached at the cap, not below.
func TestTaskSpent(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	sp, err := s.k.TaskSpent(ctx, "t1")
	require.NoError(t, err)
	require.Equal(t, Spent{}, sp, "no record, no usage")
	require.NoError(t, s.rdb.HSet(ctx, rkeys.Task("t1"), record.FieldUsage,
		record.FormatUsageSum(usage.Usage{InputTokens: 500, OutputTokens: 100, TotalTokens: 600, CostUSD: 0.01})).Err())
	sp, err = s.k.TaskSpent(ctx, "t1")
	require.NoError(t, err)
	_, over := OverCap(sp, 1000, 0)
	require.False(t, over)
	require.NoError(t, s.rdb.HSet(ctx, rkeys.Task("t1"), record.FieldUsage, "800,200,0,1000,20000000").Err())
	sp, err = s.k.TaskSpent(ctx, "t1")
	require.NoError(t, err)
	require.Equal(t, Spent{Tokens: 1000, USD: 0.02}, sp)
	why, over := OverCap(sp, 1000, 0)
	require.True(t, over)
	require.Equal(t, "max_tokens 1000 (used 1000)", why)
	why, over = OverCap(sp, 0, 0.02)
	require.True(t, over)
	require.Contains(t, why, "max_cost_usd 0.02")
}

// TestDebitHugeUsage: usage beyond what a window's sum can hold (counts
// and costs as no reply should say them, twice) is debited as clamped
// (usage.Usage.Clamp): every debit succeeds — the second once failed with
// "value is not an integer or out of range" and escaped the budget — and
// the budget is exhausted, in tokens and in dollars.
func TestDebitHugeUsage(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	b := Budget{Kind: Tenant, Name: "acme", Tokens: 1_000_000, USD: 100, Per: time.Hour}
	huge := usage.Usage{InputTokens: 9_000_000_000_000_000_000, TotalTokens: 9_000_000_000_000_000_000, CostUSD: 2.25e13, Priced: true}
	for range 2 {
		require.NoError(t, s.k.Debit(ctx, huge, b))
	}
	st, err := s.k.Status(ctx, b)
	require.NoError(t, err)
	require.Equal(t, 2*usage.MaxTokens, st.TokensUsed)
	require.Equal(t, 2*usage.MaxCostUSD, st.USDUsed)
	require.True(t, st.Exhausted)
	over, err := s.k.Check(ctx, b)
	require.NoError(t, err)
	require.NotNil(t, over)
}
