package redisx_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

// incrs increments each of its keys and answers each key's new count, in
// order: a script whose calls merge by concatenating their keys.
var incrs = redis.NewScript(`local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call("INCR", k) end
return out`)

// incrsMerger merges incrs calls and notes the largest merge.
type incrsMerger struct {
	max     int
	largest atomic.Int64
	merges  atomic.Int64 // merged script calls made
}

func (m *incrsMerger) MaxMerge() int { return m.max }

func (m *incrsMerger) Merge(calls []redisx.Call) redisx.Call {
	m.merges.Add(1)
	if n := int64(len(calls)); n > m.largest.Load() {
		m.largest.Store(n)
	}
	merged := redisx.Call{Script: incrs}
	for _, c := range calls {
		merged.Keys = append(merged.Keys, c.Keys...)
	}
	return merged
}

func (m *incrsMerger) Split(r redisx.Result, n int) []redisx.Result {
	out := make([]redisx.Result, n)
	arr, _ := r.Val.([]any)
	for i := range out {
		if r.Err != nil || len(arr) != n {
			out[i].Err = fmt.Errorf("reply %v, %v", r.Val, r.Err)
			continue
		}
		out[i].Val = []any{arr[i]}
	}
	return out
}

// scriptCalls is a go-redis hook that counts the script calls sent
// (EVALSHA and EVAL), alone or in pipelines.
type scriptCalls struct{ n atomic.Int64 }

func (s *scriptCalls) count(cmd redis.Cmder) {
	if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
		s.n.Add(1)
	}
}

func (s *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { s.count(cmd); return next(ctx, cmd) }
}

func (s *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			s.count(c)
		}
		return next(ctx, cmds)
	}
}

// TestMergedCallsShareScriptCalls: concurrent RunMerged calls of one
// kind go as fewer script calls than calls, none carrying more than the
// merger's cap, beside plain script calls and RunCalls units in the same
// flushes; every call is applied once and gets its own reply, with one
// flush in flight and with several.
func TestMergedCallsShareScriptCalls(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		for _, flushes := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/flushes=%d", be.Name, flushes), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				rdb, _ := be.New(t)
				require.NoError(t, incr.Load(ctx, rdb).Err())
				require.NoError(t, incrs.Load(ctx, rdb).Err())
				sc := &scriptCalls{}
				rdb.AddHook(sc)
				m := &incrsMerger{max: 8}
				b := redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: -1, Flushes: flushes})
				const n = 300
				merged, plain := make([]int64, n), make([]int64, n)
				var units atomic.Int64
				errs := make(chan error, 3*n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(3)
					go func() {
						defer wg.Done()
						res, err := b.RunMerged(ctx, m, redisx.Call{Script: incrs, Keys: []string{"m"}})
						arr, _ := res.([]any)
						if err == nil && len(arr) == 1 {
							merged[i], _ = arr[0].(int64)
						}
						errs <- err
					}()
					go func() {
						defer wg.Done()
						res, err := b.Run(ctx, incr, []string{"p"})
						plain[i], _ = res.(int64)
						errs <- err
					}()
					go func() {
						defer wg.Done()
						res, err := b.RunCalls(ctx, []redisx.Call{
							{Cmd: []any{"multi"}}, {Cmd: []any{"incr", "u"}}, {Cmd: []any{"incr", "u"}}, {Cmd: []any{"exec"}},
						})
						if err == nil && res[3].Err == nil {
							if v, _ := res[3].Val.([]any); len(v) == 2 && v[1].(int64) == v[0].(int64)+1 {
								units.Add(1)
							}
						}
						errs <- err
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				for name, got := range map[string][]int64{"merged": merged, "plain": plain} {
					sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
					for i, v := range got {
						require.Equal(t, int64(i+1), v, "%s: each call applied once with its own reply", name)
					}
				}
				require.Equal(t, int64(n), units.Load(), "each unit's calls together, in order")
				require.LessOrEqual(t, m.largest.Load(), int64(8), "no merged call above the cap")
				require.Less(t, m.merges.Load(), int64(n), "merged calls did not share script calls")
				require.LessOrEqual(t, sc.n.Load(), int64(n)+m.merges.Load(), "a merged call is one script call")
				t.Logf("%d merged calls in %d script calls (largest merge %d); %d script calls in all",
					n, m.merges.Load(), m.largest.Load(), sc.n.Load())
			})
		}
	}
}

// TestMergedCallAloneIsSplit: a RunMerged call that meets no other goes
// through the merger too (its reply is its part of the merged reply).
func TestMergedCallAloneIsSplit(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	b := redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: -1})
	m := &incrsMerger{max: 8}
	for i := range 3 {
		res, err := b.RunMerged(context.Background(), m, redisx.Call{Script: incrs, Keys: []string{"k"}})
		require.NoError(t, err)
		require.Equal(t, []any{int64(i + 1)}, res)
	}
}

// gate is a go-redis hook that holds every round trip until it is opened,
// and counts the round trips waiting at it.
type gate struct {
	open    chan struct{}
	waiting atomic.Int64
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) hold() {
	g.waiting.Add(1)
	<-g.open
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { g.hold(); return next(ctx, cmd) }
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { g.hold(); return next(ctx, cmds) }
}

// TestFlushesInFlight: with Flushes 2, a call that arrives while one
// flush is held in flight is sent at once, on a second round trip; with
// Flushes 1 it waits for the first. Both calls are applied, once.
func TestFlushesInFlight(t *testing.T) {
	t.Parallel()
	for _, flushes := range []int{1, 2} {
		t.Run(fmt.Sprintf("flushes=%d", flushes), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Start(t).Client()
			require.NoError(t, incr.Load(ctx, rdb).Err())
			g := &gate{open: make(chan struct{})}
			rdb.AddHook(g)
			b := redisx.NewBatcher(rdb, redisx.BatchOptions{Linger: -1, Flushes: flushes})
			errs := make(chan error, 2)
			run := func() {
				go func() {
					_, err := b.Run(ctx, incr, []string{"c"})
					errs <- err
				}()
			}
			run()
			require.Eventually(t, func() bool { return g.waiting.Load() == 1 }, 10*time.Second, time.Millisecond,
				"the first call's round trip is in flight")
			run()
			if flushes == 2 {
				require.Eventually(t, func() bool { return g.waiting.Load() == 2 }, 10*time.Second, time.Millisecond,
					"the second call went on a second round trip while the first was in flight")
			} else {
				require.Never(t, func() bool { return g.waiting.Load() > 1 }, 100*time.Millisecond, time.Millisecond,
					"the second call waits for the flush in flight")
			}
			close(g.open)
			require.NoError(t, <-errs)
			require.NoError(t, <-errs)
			n, err := rdb.Get(ctx, "c").Int()
			require.NoError(t, err)
			require.Equal(t, 2, n)
		})
	}
}
