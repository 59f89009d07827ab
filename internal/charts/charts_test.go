package charts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/tally/tallytest"
)

func newSetup(t *testing.T) tallytest.Setup {
	return tallytest.New(t, time.Date(2025, 3, 1, 10, 0, 30, 0, time.UTC))
}

// TestCounterFlushesPerMinute: attempts counted in two minutes reach Redis
// in one call per flush, whatever their number (no Redis call per
// attempt), and two counters (two workers) add up.
func TestCounterFlushesPerMinute(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	a := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now})
	b := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now})
	start := s.Clock.Now().Truncate(time.Minute)
	require.NoError(t, chartCountScript.Load(ctx, s.RDB).Err()) // as after a worker's first flush
	before := s.Trips.N.Load()
	for range 1000 {
		a.Succeeded()
	}
	for range 7 {
		a.Failed()
		b.Succeeded()
	}
	s.Clock.Add(time.Minute)
	for range 5 {
		b.Failed()
	}
	require.Equal(t, before, s.Trips.N.Load(), "counting made Redis calls")
	require.NoError(t, a.Flush(ctx))
	require.NoError(t, b.Flush(ctx))
	require.Equal(t, before+2, s.Trips.N.Load(), "one call per counter's flush")
	require.NoError(t, b.Flush(ctx))
	require.Equal(t, before+2, s.Trips.N.Load(), "a flush with nothing counted makes no call")

	got, err := Read(ctx, s.RDB, start.Add(-time.Hour), s.Clock.Now())
	require.NoError(t, err)
	require.Equal(t, []Minute{
		{At: start, Succeeded: 1007, Failed: 7},
		{At: start.Add(time.Minute), Failed: 5},
	}, got)
}

// TestQueuesReadingsShared: two writers (two consoles) of a minute's
// queue sizes leave one reading, the last; Read returns it with the
// counts.
func TestQueuesReadingsShared(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	at := s.Clock.Now()
	require.NoError(t, RecordQueues(ctx, s.RDB, at, Queues{Pending: 3}, 0))
	require.NoError(t, RecordQueues(ctx, s.RDB, at.Add(10*time.Second), Queues{Pending: 4, Active: 2, Scheduled: 1, Retry: 5}, 0))
	c := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now})
	c.Succeeded()
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.RDB, at, at)
	require.NoError(t, err)
	require.Equal(t, []Minute{{At: at.Truncate(time.Minute), Queues: &Queues{Pending: 4, Active: 2, Scheduled: 1, Retry: 5}, Succeeded: 1}}, got)
}

// TestTrimKeepsMemoryBounded: writing every minute for 30 hours of a fake
// clock keeps only the last Keep (3 hours here) of minutes in Redis.
func TestTrimKeepsMemoryBounded(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	keep := 3 * time.Hour
	c := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now, Keep: keep})
	first := s.Clock.Now()
	for range 30 * 60 {
		c.Succeeded()
		c.Failed()
		require.NoError(t, c.Flush(ctx))
		require.NoError(t, RecordQueues(ctx, s.RDB, s.Clock.Now(), Queues{Pending: 1}, keep))
		s.Clock.Add(time.Minute)
	}
	minutes := int(keep / time.Minute)
	n, err := s.RDB.ZCard(ctx, rkeys.ChartMinutes()).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(minutes+1))
	require.GreaterOrEqual(t, n, int64(minutes-1))
	fields, err := s.RDB.HLen(ctx, rkeys.ChartCounts()).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, fields, int64(3*(minutes+1)))
	old, err := Read(ctx, s.RDB, first, first.Add(20*time.Hour))
	require.NoError(t, err)
	require.Empty(t, old, "minutes older than keep are gone")
	recent, err := Read(ctx, s.RDB, s.Clock.Now().Add(-time.Hour), s.Clock.Now())
	require.NoError(t, err)
	require.Len(t, recent, 60)
}

// TestCounterFailedFlushKeepsCounts: counts a flush could not write are
// written by the next one; Stop flushes what is left, and is idempotent.
func TestCounterFailedFlushKeepsCounts(t *testing.T) {
	t.Parallel()
	s := tallytest.New(t, time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC))
	c := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now, Every: time.Hour})
	c.Failed()
	s.Srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.Error(t, c.Flush(ctx))
	s.Srv.Restart()
	c.Start(context.Background())
	c.Succeeded()
	c.Stop()
	c.Stop()
	got, err := Read(context.Background(), s.RDB, s.Clock.Now(), s.Clock.Now())
	require.NoError(t, err)
	require.Equal(t, []Minute{{At: s.Clock.Now(), Succeeded: 1, Failed: 1}}, got)
}

// TestNilCounter: a nil counter counts nothing and does not panic.
func TestNilCounter(t *testing.T) {
	t.Parallel()
	var c *Counter
	c.Succeeded()
	c.Failed()
}

// TestCounterLostReplyCountsOnce: a flush applied in Redis whose reply was
// lost is sent again with its number and counts once (it was counted
// twice: the counter put its counts back and added them again), and the
// attempts counted meanwhile count too.
func TestCounterLostReplyCountsOnce(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	c := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now})
	c.Succeeded()
	c.Failed()
	s.Lost.Arm()
	err := c.Flush(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFlushRefused)
	c.Succeeded()
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.RDB, s.Clock.Now(), s.Clock.Now())
	require.NoError(t, err)
	require.Equal(t, []Minute{{At: s.Clock.Now().Truncate(time.Minute), Succeeded: 2, Failed: 1}}, got)
}

// TestCounterRefusedFlushDropped: a flush Redis refuses (an error reply)
// is dropped, not sent again.
func TestCounterRefusedFlushDropped(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	require.NoError(t, s.RDB.Set(ctx, rkeys.ChartCounts(), "not a hash", 0).Err())
	c := NewCounter(s.RDB, CounterOptions{Now: s.Clock.Now})
	c.Succeeded()
	require.ErrorIs(t, c.Flush(ctx), ErrFlushRefused)
	require.NoError(t, s.RDB.Del(ctx, rkeys.ChartCounts()).Err())
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.RDB, s.Clock.Now(), s.Clock.Now())
	require.NoError(t, err)
	require.Empty(t, got, "the refused flush was not sent again")
}
