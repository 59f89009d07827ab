package redisx_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

var incr = redis.NewScript(`return redis.call("INCR", KEYS[1])`)

// TestConcurrentCallsShareRoundTrips: every caller gets its own reply, each
// applied exactly once, in fewer round trips than calls.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := be.New(t)
			h := &redistest.RoundTrips{}
			rdb.AddHook(h)
			b := redisx.NewBatcher(rdb, redisx.BatchOptions{MaxBatch: 16})
			const n = 400
			got := make([]int64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var res any
					res, errs[i] = b.Run(context.Background(), incr, []string{"c"})
					got[i], _ = res.(int64)
				}()
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			for i, v := range got {
				require.Equal(t, int64(i+1), v, "each call applied once with its own reply")
			}
			require.Less(t, h.N.Load(), int64(n), "calls did not share round trips")
			t.Logf("%d calls in %d round trips", n, h.N.Load())
		})
	}
}

// TestReloadsScriptsAfterFlush: a Redis that lost its scripts (restart,
// SCRIPT FLUSH) answers NOSCRIPT; the calls are run again, once.
func TestReloadsScriptsAfterFlush(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	b := redisx.NewBatcher(rdb, redisx.BatchOptions{})
	_, err := b.Run(ctx, incr, []string{"c"})
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = b.Run(ctx, incr, []string{"c"}) }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	v, err := rdb.Get(ctx, "c").Int()
	require.NoError(t, err)
	require.Equal(t, 51, v)
}

// TestCanceledBeforeQueueing returns the context's error and runs nothing.
func TestCanceledBeforeQueueing(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := redisx.NewBatcher(rdb, redisx.BatchOptions{}).Run(ctx, incr, []string{"c"})
	require.ErrorIs(t, err, context.Canceled)
	n, err := rdb.Exists(context.Background(), "c").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestCallsInARowShareRoundTrips: callers that do not overlap but come
// close after one another (a worker's quick tasks ending one by one) still
// share round trips: the leader lingers for the next few. Each call is
// applied once, with its own reply.
func TestCallsInARowShareRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	h := &redistest.RoundTrips{}
	rdb.AddHook(h)
	b := redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: 20 * time.Millisecond, LingerCalls: 4})
	const n = 200
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res any
			res, errs[i] = b.Run(context.Background(), incr, []string{"c"})
			got[i], _ = res.(int64)
		}()
		time.Sleep(200 * time.Microsecond) // one after another, not all at once
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	for i, v := range got {
		require.Equal(t, int64(i+1), v, "each call applied once with its own reply")
	}
	require.Less(t, h.N.Load(), int64(n/2), "calls in a row did not share round trips")
	t.Logf("%d calls in %d round trips", n, h.N.Load())
}

// TestOneCallerAtATimeRarelyWaits: a caller that waits for its reply
// before the next call (one task at a time) gets no company; the waits
// back off, so nearly every call goes at once, and each is applied once.
func TestOneCallerAtATimeRarelyWaits(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	require.NoError(t, incr.Load(context.Background(), rdb).Err())
	h := &redistest.RoundTrips{}
	rdb.AddHook(h)
	b := redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: 50 * time.Millisecond, LingerCalls: 4})
	const n = 300
	for i := range n {
		res, err := b.Run(context.Background(), incr, []string{"c"})
		require.NoError(t, err)
		require.Equal(t, int64(i+1), res)
	}
	require.Equal(t, int64(n), h.N.Load(), "one round trip per call")
}

// TestRunCallsUnits: concurrent RunCalls units (MULTI, two INCRs, EXEC) and
// script calls share round trips; each unit's calls stay together and in
// order (its EXEC answers two consecutive counts), each gets its own results.
func TestRunCallsUnits(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	h := &redistest.RoundTrips{}
	rdb.AddHook(h)
	b := redisx.NewBatcher(rdb, redisx.BatchOptions{MaxBatch: 16, Linger: -1})
	const n = 200
	execs := make([][]redisx.Result, n)
	scripts := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			execs[i], _ = b.RunCalls(context.Background(), []redisx.Call{
				{Cmd: []any{"multi"}}, {Cmd: []any{"incr", "u"}}, {Cmd: []any{"incr", "u"}}, {Cmd: []any{"exec"}},
			})
		}()
		go func() {
			defer wg.Done()
			_, scripts[i] = b.Run(context.Background(), incr, []string{"s"})
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i, res := range execs {
		require.Len(t, res, 4, "unit %d", i)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
		replies, ok := res[3].Val.([]any)
		require.True(t, ok, "EXEC's reply: %v", res[3].Val)
		require.Len(t, replies, 2)
		first, second := replies[0].(int64), replies[1].(int64)
		require.Equal(t, first+1, second, "a unit's calls run together")
		require.False(t, seen[first])
		seen[first] = true
		require.NoError(t, scripts[i])
	}
	require.Equal(t, "400", rdb.Get(context.Background(), "u").Val())
	require.Equal(t, "200", rdb.Get(context.Background(), "s").Val())
	require.Less(t, h.N.Load(), int64(2*n), "units did not share round trips")
}
