package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// manualTicker is a Ticker the test ticks.
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

// TestOneClaimantRunsPerInterval: two workers of a fleet, on a real Redis,
// tick together: at start and at every tick after the last claim expired,
// exactly one of them runs the job, and Each runs on both.
func TestOneClaimantRunsPerInterval(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const interval = 200 * time.Millisecond
	var runs, each atomic.Int32
	var mu sync.Mutex
	tried, won := 0, 0
	var tickers []manualTicker
	var services []*Every
	for _, holder := range []string{"w1", "w2"} {
		tk := manualTicker{c: make(chan time.Time)}
		tickers = append(tickers, tk)
		e := One(rdb, interval, Job{Key: "test:claim", Run: func(context.Context) { runs.Add(1) }}, Options{
			Holder: holder, Each: func(context.Context) { each.Add(1) },
			NewTicker: func(d time.Duration) Ticker { assert.Equal(t, interval, d); return tk },
			tried: func(key string, w bool) {
				assert.Equal(t, "test:claim", key)
				mu.Lock()
				defer mu.Unlock()
				tried++
				if w {
					won++
				}
			},
		})
		services = append(services, e)
		e.Start(ctx)
	}
	triedN := func() int { mu.Lock(); defer mu.Unlock(); return tried }
	for round := 1; round <= 3; round++ {
		if round > 1 {
			require.Eventually(t, func() bool { return rdb.Exists(ctx, "test:claim").Val() == 0 },
				5*time.Second, 5*time.Millisecond, "the claim expires within its interval")
			for _, tk := range tickers {
				tk.c <- time.Now()
			}
		}
		require.Eventually(t, func() bool { return triedN() == 2*round }, 5*time.Second, 5*time.Millisecond)
		require.EqualValues(t, round, runs.Load(), "one run per interval for the fleet")
		require.EqualValues(t, 2*round, each.Load(), "Each runs on every worker")
		ttl := rdb.PTTL(ctx, "test:claim").Val()
		require.True(t, ttl > 0 && ttl <= TTL(interval), "the claim holds a tenth short of the interval: %s", ttl)
	}
	for _, e := range services {
		e.Stop()
		e.Stop()
	}
	require.Equal(t, 3, won)
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
	require.Equal(t, "1", rdb.Get(context.Background(), "test:delay").Val(), "the default holder")
	cancel()
	e.Stop()

	never := One(rdb, time.Hour, Job{Key: "test:never", Run: func(context.Context) { runs.Add(1) }}, Options{})
	never.Stop()
	never.Start(context.Background())
	require.EqualValues(t, 1, runs.Load())
}
