package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// manualTicker is a Ticker the test ticks.
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

// claimant is one worker's Every in a test: its ticker, its runs, its
// claims (won and lost) and its ticks done.
type claimant struct {
	e          *Every
	tk         manualTicker
	runs, each atomic.Int32
	idle       atomic.Int32 // Job.Idle's runs
	won, lost  atomic.Int32
	ticks      chan struct{}
}

// newClaimant is a claimant of job key for holder, with o's clock and
// lease floor, started on ctx.
func newClaimant(t *testing.T, ctx context.Context, rdb redis.UniversalClient, key, holder string, interval time.Duration, o Options) *claimant {
	c := &claimant{tk: manualTicker{c: make(chan time.Time)}, ticks: make(chan struct{}, 64)}
	o.Holder = holder
	o.Each = func(context.Context) { c.each.Add(1) }
	o.NewTicker = func(d time.Duration) Ticker { assert.Equal(t, interval, d); return c.tk }
	o.tried = func(k string, w bool) {
		assert.Equal(t, key, k)
		if w {
			c.won.Add(1)
		} else {
			c.lost.Add(1)
		}
	}
	o.ticked = func() { c.ticks <- struct{}{} }
	c.e = One(rdb, interval, Job{Key: key, Run: func(context.Context) { c.runs.Add(1) },
		Idle: func(context.Context) { c.idle.Add(1) }}, o)
	c.e.Start(ctx)
	t.Cleanup(c.e.Stop)
	return c
}

// tick ticks c and waits for the tick's end.
func (c *claimant) tick(t *testing.T) {
	c.tk.c <- time.Now()
	c.wait(t)
}

func (c *claimant) wait(t *testing.T) {
	select {
	case <-c.ticks:
	case <-time.After(10 * time.Second):
		t.Fatal("the tick did not end")
	}
}

// TestOneHolderPerIntervalOneClaimPerLease: three workers of a fleet, on
// a real Redis, tick together N times on a clock moved one interval per
// tick: the job runs exactly once per tick fleet-wide, always on the one
// holder, Each on all, and Idle on every other worker at every tick; the
// non-holders claim once per lease they saw
// (not per tick), the holder renews once per half lease.
func TestOneHolderPerIntervalOneClaimPerLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const interval, ticks = 500 * time.Millisecond, 40 // 20 s: four leases
	var clock atomic.Int64                             // the test's clock, in ns
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var cs []*claimant
	for _, h := range []string{"w1", "w2", "w3"} {
		c := newClaimant(t, ctx, rdb, "test:claim", h, interval, Options{Now: now})
		c.wait(t) // the tick at start
		cs = append(cs, c)
	}
	for range ticks {
		clock.Add(int64(interval))
		for _, c := range cs {
			c.tick(t)
		}
	}
	var holder *claimant
	runs, nonHolderClaims := int32(0), int32(0)
	for _, c := range cs {
		runs += c.runs.Load()
		require.EqualValues(t, ticks+1, c.each.Load(), "Each runs on every worker at every tick")
		require.EqualValues(t, ticks+1, c.runs.Load()+c.idle.Load(), "Run or Idle at every tick")
		if c.runs.Load() > 0 {
			require.Nil(t, holder, "one holder")
			holder = c
		} else {
			require.Zero(t, c.won.Load())
			nonHolderClaims += c.lost.Load()
		}
	}
	require.EqualValues(t, ticks+1, runs, "one run per tick for the fleet")
	require.NotNil(t, holder)
	require.Zero(t, holder.lost.Load())
	leases := int32(ticks * interval / MinLease)
	require.LessOrEqual(t, holder.won.Load(), 1+2*leases, "the holder renews once per half lease")
	require.LessOrEqual(t, nonHolderClaims, 2*(1+leases), "a non-holder claims once per lease, not per tick")
	require.True(t, strings.HasPrefix(rdb.Get(ctx, "test:claim").Val(), "w"), "the lease names its holder")
	ttl := rdb.PTTL(ctx, "test:claim").Val()
	require.True(t, ttl > 0 && ttl <= MinLease, "the lease is MinLease long: %s", ttl)
}

// TestTakeoverAfterDeath: a lease whose holder died (never renewed) is
// taken over once it runs out: the survivor claims once when it first
// ticks, skips its ticks while the lease lasts, and takes it on the
// first tick after.
func TestTakeoverAfterDeath(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "test:dead", "ghost#1", 300*time.Millisecond).Err())
	c := newClaimant(t, ctx, rdb, "test:dead", "w1", time.Hour, Options{TTL: 200 * time.Millisecond, minLease: time.Millisecond})
	c.wait(t)
	require.EqualValues(t, 1, c.lost.Load())
	start := time.Now()
	require.Eventually(t, func() bool { c.tick(t); return c.runs.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "not before the dead holder's lease ran out")
	require.EqualValues(t, 1, c.lost.Load(), "no claim while the lease it saw lasted")
	require.EqualValues(t, 1, c.won.Load())
}

// TestStopReleases: a holder's Stop deletes its lease at once, and the
// other worker takes the job over at its next claim; a release leaves
// another holder's lease alone.
func TestStopReleases(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	o := Options{TTL: 300 * time.Millisecond, minLease: time.Millisecond}
	a := newClaimant(t, ctx, rdb, "test:stop", "a", time.Hour, o)
	a.wait(t)
	b := newClaimant(t, ctx, rdb, "test:stop", "b", time.Hour, o)
	b.wait(t)
	require.EqualValues(t, 1, a.runs.Load())
	require.EqualValues(t, 1, b.lost.Load())
	a.e.Stop()
	require.Zero(t, rdb.Exists(ctx, "test:stop").Val(), "released at Stop")
	require.Eventually(t, func() bool { b.tick(t); return b.runs.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	released, err := releaseLease(ctx, rdb, "test:stop", a.e.holder)
	require.NoError(t, err)
	require.False(t, released, "b's lease is not a's to release")
	require.Equal(t, b.e.holder, rdb.Get(ctx, "test:stop").Val())
}

// TestDelayAndStop: with Delay there is no tick at start; a tick runs the
// job; Stop before Start means it never runs; a canceled context ends the
// loop.
func TestDelayAndStop(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	var runs atomic.Int32
	tk := manualTicker{c: make(chan time.Time)}
	e := One(rdb, time.Hour, Job{Key: "test:delay", Run: func(context.Context) { runs.Add(1) }},
		Options{Delay: true, NewTicker: func(time.Duration) Ticker { return tk }})
	ctx, cancel := context.WithCancel(context.Background())
	e.Start(ctx)
	tk.c <- time.Now() // received: the start did not tick
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	require.True(t, strings.HasPrefix(rdb.Get(context.Background(), "test:delay").Val(), "1#"), "the default holder")
	cancel()
	e.Stop()

	never := One(rdb, time.Hour, Job{Key: "test:never", Run: func(context.Context) { runs.Add(1) }}, Options{})
	never.Stop()
	never.Start(context.Background())
	require.EqualValues(t, 1, runs.Load())
}
