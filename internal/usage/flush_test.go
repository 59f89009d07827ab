package usage

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
)

// tenantsOf reads the totals of the last day by tenant.
func tenantsOf(t *testing.T, s setup) map[string]Counts {
	t.Helper()
	r, err := Summarize(context.Background(), s.RDB, "tenant", 24*time.Hour, s.Clock.Now())
	require.NoError(t, err)
	out := map[string]Counts{}
	for _, g := range r.Groups {
		out[g.Key] = g.Counts
	}
	return out
}

// TestFlushHugeUsage: the attack on a real redis-server — a
// series reported 9e18 input tokens twice (by two workers' recorders,
// and twice in one) beside other tenants' plain usage: every flush
// succeeds, the huge series counts its attempts' clamped counts, every
// other tenant is counted exactly once however many flushes follow, and
// a counter already near (or, written by an older version, beyond) the
// ceiling saturates at MaxSum instead of failing the flush.
func TestFlushHugeUsage(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	huge := Usage{Model: "m", InputTokens: 9_000_000_000_000_000_000}
	small := Usage{Model: "m", InputTokens: 100, OutputTokens: 10}
	w1, w2 := s.recorder(RecorderOptions{}), s.recorder(RecorderOptions{})
	for _, rec := range []*Recorder{w1, w2} {
		rec.Add(Entry{Agent: "llm", Tenant: "acme", Usage: huge})
		rec.Add(Entry{Agent: "llm", Tenant: "acme", Usage: huge})
	}
	for _, tn := range []string{"b", "c", "d"} {
		w1.Add(Entry{Agent: "llm", Tenant: tn, Usage: small})
	}
	for range 3 {
		require.NoError(t, w1.Flush(ctx))
		require.NoError(t, w2.Flush(ctx))
	}
	got := tenantsOf(t, s)
	require.Equal(t, Counts{InputTokens: 4 * MaxTokens, TotalTokens: 4 * MaxTokens, Attempts: 4}, got["acme"])
	for _, tn := range []string{"b", "c", "d"} {
		require.Equal(t, Counts{InputTokens: 100, OutputTokens: 10, TotalTokens: 110, Attempts: 1}, got[tn], "tenant %s", tn)
	}

	h := rkeys.UsageHour(unixHour(s.Clock.Now()))
	field := "llm" + sep + "acme" + sep + "m" + sep
	require.NoError(t, s.RDB.HSet(ctx, h, field+"in", MaxSum-10, field+"total", "9000000000000000000").Err())
	w1.Add(Entry{Agent: "llm", Tenant: "acme", Usage: huge})
	require.NoError(t, w1.Flush(ctx))
	got = tenantsOf(t, s)
	require.Equal(t, MaxSum, got["acme"].InputTokens, "saturated")
	require.Equal(t, MaxSum, got["acme"].TotalTokens, "saturated, from beyond the ceiling")
	require.Equal(t, int64(5), got["acme"].Attempts)
	require.Equal(t, int64(110), got["b"].TotalTokens)
	stored, err := s.RDB.HMGet(ctx, h, field+"in", field+"total").Result()
	require.NoError(t, err)
	require.Equal(t, []any{"9007199254740992", "9007199254740992"}, stored, "stored saturated: MaxSum")
}

// TestFlushLostReplyCountsOnce: a flush applied in Redis whose reply was
// lost is kept and sent again with its number: it counts once, and the
// counts added meanwhile count too.
func TestFlushLostReplyCountsOnce(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	rec := s.recorder(RecorderOptions{})
	rec.Add(Entry{Agent: "llm", Tenant: "acme", Usage: Usage{InputTokens: 7}})
	s.Lost.Arm()
	err := rec.Flush(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFlushRefused)
	rec.Add(Entry{Agent: "llm", Tenant: "acme", Usage: Usage{InputTokens: 5}})
	require.NoError(t, rec.Flush(ctx))
	require.NoError(t, rec.Flush(ctx))
	require.Equal(t, Counts{InputTokens: 12, TotalTokens: 12, Attempts: 2}, tenantsOf(t, s)["acme"])
}

// syncBuffer is a log sink tests read while the loop writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFlushRefusedDropped: a flush Redis refuses writes nothing (none of
// its hours: all or nothing), is logged at WARN, and is never sent again.
func TestFlushRefusedDropped(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	now := s.Clock.Now()
	earlier := now.Add(-time.Hour)
	require.NoError(t, s.RDB.Set(ctx, rkeys.UsageSeries(unixHour(now)), "not a set", 0).Err())
	logs := &syncBuffer{}
	rec := s.recorder(RecorderOptions{Every: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	rec.Add(Entry{Agent: "llm", Tenant: "acme", At: earlier, Usage: Usage{InputTokens: 3}})
	rec.Add(Entry{Agent: "llm", Tenant: "acme", At: now, Usage: Usage{InputTokens: 4}})
	require.NoError(t, totalsScript.Load(ctx, s.RDB).Err())
	before := s.Trips.N.Load()
	rec.Start(ctx)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "level=WARN") },
		30*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), "flush refused")
	rec.Stop()
	require.EqualValues(t, 1, s.Trips.N.Load()-before, "one call: the refused flush is not sent again")
	require.Zero(t, s.RDB.Exists(ctx, rkeys.UsageHour(unixHour(earlier)), rkeys.UsageHour(unixHour(now))).Val(),
		"nothing of the refused flush was written")
}
