package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/tally/tallytest"
)

// testNow is half past this hour: near the server's clock, for the keys'
// expiry times are absolute.
func testNow() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute) }

type setup struct{ tallytest.Setup }

func newSetup(t *testing.T) setup { return setup{tallytest.New(t, testNow())} }

func (s setup) recorder(opts RecorderOptions) *Recorder {
	opts.Now = s.Clock.Now
	return NewRecorder(s.RDB, opts)
}

// TestRecorderTotalsExact: many concurrent Adds (four "workers", each its
// own recorder) flush to totals that match the sums exactly: tokens, and
// cost to the micro-dollar; one script call per flush, none when idle.
func TestRecorderTotalsExact(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	recs := make([]*Recorder, 4)
	for i := range recs {
		recs[i] = s.recorder(RecorderOptions{})
	}
	require.NoError(t, totalsScript.Load(ctx, s.RDB).Err())
	var wg sync.WaitGroup
	var want Counts
	var costSum float64
	var mu sync.Mutex
	for w, rec := range recs {
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 250 {
					e := Entry{Agent: "llm", Tenant: fmt.Sprintf("t%d", (w+g+i)%3), At: s.Clock.Now(),
						Usage: Usage{Model: "gpt-x", InputTokens: int64(100 + i), OutputTokens: int64(7 + g), CachedTokens: int64(i % 5),
							CostUSD: float64(100+i)*0.0000025 + float64(7+g)*0.00001, Priced: true}}
					rec.Add(e)
					mu.Lock()
					want.InputTokens += e.InputTokens
					want.OutputTokens += e.OutputTokens
					want.CachedTokens += e.CachedTokens
					want.CostMicroUSD += int64(math.Round(e.CostUSD * 1e6)) // each attempt's cost to the micro-dollar
					costSum += e.CostUSD
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	before := s.Trips.N.Load()
	for _, rec := range recs {
		require.NoError(t, rec.Flush(ctx))
	}
	require.EqualValues(t, len(recs), s.Trips.N.Load()-before, "one script call per flush")
	before = s.Trips.N.Load()
	require.NoError(t, recs[0].Flush(ctx))
	require.EqualValues(t, 0, s.Trips.N.Load()-before, "nothing to flush: no call")

	r, err := Summarize(ctx, s.RDB, "agent", 24*time.Hour, s.Clock.Now())
	require.NoError(t, err)
	require.Len(t, r.Groups, 1)
	got := r.Groups[0]
	require.Equal(t, "llm", got.Key)
	require.Equal(t, int64(4*8*250), got.Attempts)
	require.Equal(t, want.InputTokens, got.InputTokens)
	require.Equal(t, want.OutputTokens, got.OutputTokens)
	require.Equal(t, want.CachedTokens, got.CachedTokens)
	require.Equal(t, want.InputTokens+want.OutputTokens, got.TotalTokens)
	require.Equal(t, want.CostMicroUSD, got.CostMicroUSD, "cost to the micro-dollar")
	require.InDelta(t, float64(want.CostMicroUSD)/1e6, got.CostUSD, 1e-9)
	require.InDelta(t, costSum, got.CostUSD, 0.005, "to the cent")

	byTenant, err := Summarize(ctx, s.RDB, "tenant", 24*time.Hour, s.Clock.Now())
	require.NoError(t, err)
	require.Len(t, byTenant.Groups, 3)
	var sum Counts
	for _, g := range byTenant.Groups {
		sum.Plus(g.Counts)
	}
	require.Equal(t, got.Counts, sum)
}

// TestSinceWindows: --since picks the hours that overlap the window, by an
// injected clock, and the per-hour series holds each of them.
func TestSinceWindows(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	rec := s.recorder(RecorderOptions{})
	now := s.Clock.Now() // hh:30
	for _, back := range []time.Duration{0, time.Hour, 3 * time.Hour, 30 * time.Hour} {
		rec.Add(Entry{Agent: "a", At: now.Add(-back), Usage: Usage{InputTokens: 1, OutputTokens: 1}})
	}
	require.NoError(t, rec.Flush(ctx))
	for _, tc := range []struct {
		since    time.Duration
		attempts int64
		hours    int
	}{
		{10 * time.Minute, 1, 1}, // 10:20..10:30: this hour
		{45 * time.Minute, 2, 2}, // 09:45..: and 09:xx
		{2 * time.Hour, 2, 2},    // 08:30..: 08:xx holds nothing
		{3 * time.Hour, 3, 3},    // 07:30..: 07:30 is in
		{24 * time.Hour, 3, 3},   // 30h ago is out
		{31 * time.Hour, 4, 4},   // and in
		{0, 1, 1},                // the current hour
	} {
		r, err := Summarize(ctx, s.RDB, "", tc.since, now)
		require.NoError(t, err)
		require.Equal(t, "agent", r.By)
		require.Equal(t, tc.attempts, r.Total.Attempts, "since %s", tc.since)
		require.Len(t, r.Hours, tc.hours, "since %s", tc.since)
	}
	_, err := Summarize(ctx, s.RDB, "queue", time.Hour, now)
	require.ErrorIs(t, err, ErrBadGroup)
}

// TestRetention: each hour's keys expire the retention after the hour
// ends; an entry older than that is not written.
func TestRetention(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	rec := s.recorder(RecorderOptions{Retention: 48 * time.Hour})
	now := s.Clock.Now()
	rec.Add(Entry{Agent: "a", At: now, Usage: Usage{InputTokens: 5}})
	rec.Add(Entry{Agent: "a", At: now.Add(-49 * time.Hour), Usage: Usage{InputTokens: 5}}) // gone already
	require.NoError(t, rec.Flush(ctx))
	h := unixHour(now)
	wantExp := time.Unix((h+1)*3600, 0).Add(48 * time.Hour)
	for _, k := range []string{rkeys.UsageHour(h), rkeys.UsageSeries(h)} {
		exp, err := s.RDB.ExpireTime(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, wantExp.Unix(), int64(exp/time.Second), k)
	}
	n, err := s.RDB.Exists(ctx, rkeys.UsageHour(unixHour(now.Add(-49*time.Hour)))).Result()
	require.NoError(t, err)
	require.Zero(t, n, "an hour past the retention is not written")
	// Redis expires the hour at its time: seen by a server clock moved
	// past it (DEBUG SET-ACTIVE-EXPIRE is not needed: EXPIREAT in the past
	// deletes at once).
	require.NoError(t, s.RDB.ExpireAt(ctx, rkeys.UsageHour(h), time.Unix(1, 0)).Err())
	r, err := Summarize(ctx, s.RDB, "agent", time.Hour, now)
	require.NoError(t, err)
	require.Empty(t, r.Groups)
}

// TestSeriesBound: an hour counts at most N + N/10 + 1 series; beyond N a
// new series is counted under tenant "other", beyond N + N/10 under
// ("other", "other", "other"); totals are not lost.
func TestSeriesBound(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	const n = 20
	a := s.recorder(RecorderOptions{MaxSeries: n})
	for i := range n + 5 {
		a.Add(Entry{Agent: "a", Tenant: fmt.Sprintf("t%d", i), At: s.Clock.Now(), Usage: Usage{InputTokens: 1}})
	}
	require.NoError(t, a.Flush(ctx))
	// another worker's series, beyond the bound in Redis only
	b := s.recorder(RecorderOptions{MaxSeries: n})
	for i := range 10 {
		b.Add(Entry{Agent: fmt.Sprintf("b%d", i), Tenant: "u", At: s.Clock.Now(), Usage: Usage{InputTokens: 1}})
	}
	require.NoError(t, b.Flush(ctx))
	h := unixHour(s.Clock.Now())
	card, err := s.RDB.SCard(ctx, rkeys.UsageSeries(h)).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, card, int64(n+n/10+1))
	r, err := Summarize(ctx, s.RDB, "tenant", time.Hour, s.Clock.Now())
	require.NoError(t, err)
	require.Equal(t, int64(n+5+10), r.Total.InputTokens, "nothing lost")
	other := map[string]int64{}
	for _, g := range r.Groups {
		other[g.Key] = g.InputTokens
	}
	require.Equal(t, int64(5+10), other[Other], "beyond the bound: tenant other: %v", r.Groups)
	byAgent, err := Summarize(ctx, s.RDB, "agent", time.Hour, s.Clock.Now())
	require.NoError(t, err)
	agents := map[string]int64{}
	for _, g := range byAgent.Groups {
		agents[g.Key] = g.InputTokens
	}
	require.Equal(t, int64(n+5), agents["a"])
	require.Positive(t, agents[Other], "beyond N + N/10: agent other too")
}

// TestFailedFlushKeeps: a flush that fails keeps its counts for the next;
// Stop flushes what is left; Add never waits for Redis.
func TestFailedFlushKeeps(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	rec := s.recorder(RecorderOptions{Every: time.Hour})
	rec.Add(Entry{Agent: "a", At: s.Clock.Now(), Usage: Usage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.01}})
	s.Srv.Pause()
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := rec.Flush(fctx)
	cancel()
	require.Error(t, err)
	done := make(chan struct{})
	go func() { // Add takes no Redis call even while Redis hangs
		rec.Add(Entry{Agent: "a", At: s.Clock.Now(), Usage: Usage{InputTokens: 1}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Add blocked")
	}
	s.Srv.Resume()
	rec.Start(ctx)
	rec.Stop()
	rec.Stop() // idempotent
	r, err := Summarize(ctx, s.RDB, "agent", time.Hour, s.Clock.Now())
	require.NoError(t, err)
	require.Len(t, r.Groups, 1)
	require.Equal(t, int64(4), r.Groups[0].InputTokens)
	require.Equal(t, int64(7+1), r.Groups[0].TotalTokens)
	require.Equal(t, int64(10000), r.Groups[0].CostMicroUSD)
	require.Equal(t, int64(2), r.Groups[0].Attempts)
}

// TestRecorderLoopFlushes: the loop flushes on its own, within a few
// intervals, and ends with its context.
func TestRecorderLoopFlushes(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	rec := s.recorder(RecorderOptions{Every: 20 * time.Millisecond})
	rec.Start(ctx)
	rec.Add(Entry{Agent: "a", At: s.Clock.Now(), Usage: Usage{InputTokens: 9}})
	require.Eventually(t, func() bool {
		r, err := Summarize(context.Background(), s.RDB, "agent", time.Hour, s.Clock.Now())
		return err == nil && r.Total.InputTokens == 9
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	rec.Stop()
	var nilRec *Recorder
	nilRec.Add(Entry{})
	require.NoError(t, nilRec.Flush(context.Background()))
	require.False(t, errors.Is(nil, ErrBadGroup))
}
