package charts

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type setup struct {
	rdb   *redis.Client
	trips *redistest.RoundTrips
	clock *fakeClock
}

func newSetup(t *testing.T) setup {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	trips := &redistest.RoundTrips{}
	rdb.AddHook(trips)
	return setup{rdb: rdb, trips: trips, clock: &fakeClock{now: time.Date(2025, 3, 1, 10, 0, 30, 0, time.UTC)}}
}

// TestCounterFlushesPerMinute: attempts counted in two minutes reach Redis
// in one call per flush, whatever their number (no Redis call per
// attempt), and two counters (two workers) add up.
func TestCounterFlushesPerMinute(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	a := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now})
	b := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now})
	start := s.clock.Now().Truncate(time.Minute)
	require.NoError(t, chartCountScript.Load(ctx, s.rdb).Err()) // as after a worker's first flush
	before := s.trips.N.Load()
	for range 1000 {
		a.Succeeded()
	}
	for range 7 {
		a.Failed()
		b.Succeeded()
	}
	s.clock.Add(time.Minute)
	for range 5 {
		b.Failed()
	}
	require.Equal(t, before, s.trips.N.Load(), "counting made Redis calls")
	require.NoError(t, a.Flush(ctx))
	require.NoError(t, b.Flush(ctx))
	require.Equal(t, before+2, s.trips.N.Load(), "one call per counter's flush")
	require.NoError(t, b.Flush(ctx))
	require.Equal(t, before+2, s.trips.N.Load(), "a flush with nothing counted makes no call")

	got, err := Read(ctx, s.rdb, start.Add(-time.Hour), s.clock.Now())
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
	at := s.clock.Now()
	require.NoError(t, RecordQueues(ctx, s.rdb, at, Queues{Pending: 3}, 0))
	require.NoError(t, RecordQueues(ctx, s.rdb, at.Add(10*time.Second), Queues{Pending: 4, Active: 2, Scheduled: 1, Retry: 5}, 0))
	c := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now})
	c.Succeeded()
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.rdb, at, at)
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
	c := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now, Keep: keep})
	first := s.clock.Now()
	for range 30 * 60 {
		c.Succeeded()
		c.Failed()
		require.NoError(t, c.Flush(ctx))
		require.NoError(t, RecordQueues(ctx, s.rdb, s.clock.Now(), Queues{Pending: 1}, keep))
		s.clock.Add(time.Minute)
	}
	minutes := int(keep / time.Minute)
	n, err := s.rdb.ZCard(ctx, rkeys.ChartMinutes()).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(minutes+1))
	require.GreaterOrEqual(t, n, int64(minutes-1))
	fields, err := s.rdb.HLen(ctx, rkeys.ChartCounts()).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, fields, int64(3*(minutes+1)))
	old, err := Read(ctx, s.rdb, first, first.Add(20*time.Hour))
	require.NoError(t, err)
	require.Empty(t, old, "minutes older than keep are gone")
	recent, err := Read(ctx, s.rdb, s.clock.Now().Add(-time.Hour), s.clock.Now())
	require.NoError(t, err)
	require.Len(t, recent, 60)
}

// TestCounterFailedFlushKeepsCounts: counts a flush could not write are
// written by the next one; Stop flushes what is left, and is idempotent.
func TestCounterFailedFlushKeepsCounts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	clock := &fakeClock{now: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)}
	c := NewCounter(rdb, CounterOptions{Now: clock.Now, Every: time.Hour})
	c.Failed()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.Error(t, c.Flush(ctx))
	srv.Restart()
	c.Start(context.Background())
	c.Succeeded()
	c.Stop()
	c.Stop()
	got, err := Read(context.Background(), rdb, clock.Now(), clock.Now())
	require.NoError(t, err)
	require.Equal(t, []Minute{{At: clock.Now(), Succeeded: 1, Failed: 1}}, got)
}

// TestNilCounter: a nil counter counts nothing and does not panic.
func TestNilCounter(t *testing.T) {
	t.Parallel()
	var c *Counter
	c.Succeeded()
	c.Failed()
}

// lostReply is a go-redis hook that lets the next script run in Redis but
// answers its caller with a transport error, as a connection that dropped
// after the command was sent.
type lostReply struct{ armed atomic.Bool }

func (l *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && err == nil && l.armed.CompareAndSwap(true, false) {
			return errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")
		}
		return err
	}
}

func (l *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCounterLostReplyCountsOnce: a flush applied in Redis whose reply was
// lost is sent again with its number and counts once (it was counted
// twice: the counter put its counts back and added them again), and the
// attempts counted meanwhile count too.
func TestCounterLostReplyCountsOnce(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	lost := &lostReply{}
	s.rdb.AddHook(lost)
	c := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now})
	c.Succeeded()
	c.Failed()
	lost.armed.Store(true)
	err := c.Flush(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFlushRefused)
	c.Succeeded()
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.rdb, s.clock.Now(), s.clock.Now())
	require.NoError(t, err)
	require.Equal(t, []Minute{{At: s.clock.Now().Truncate(time.Minute), Succeeded: 2, Failed: 1}}, got)
}

// TestCounterRefusedFlushDropped: a flush Redis refuses (an error reply)
// is dropped, not sent again.
func TestCounterRefusedFlushDropped(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	require.NoError(t, s.rdb.Set(ctx, rkeys.ChartCounts(), "not a hash", 0).Err())
	c := NewCounter(s.rdb, CounterOptions{Now: s.clock.Now})
	c.Succeeded()
	require.ErrorIs(t, c.Flush(ctx), ErrFlushRefused)
	require.NoError(t, s.rdb.Del(ctx, rkeys.ChartCounts()).Err())
	require.NoError(t, c.Flush(ctx))
	got, err := Read(ctx, s.rdb, s.clock.Now(), s.clock.Now())
	require.NoError(t, err)
	require.Empty(t, got, "the refused flush was not sent again")
}
