package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/redistest"
)

// BenchmarkLimiter measures what provider limits cost Redis: the CPU
// redis-server spends (INFO cpu) per admitted call of the limiter — the
// admission script alone, and a whole limited call's bookkeeping
// (admission, lease release, token debit) — with every limit set
// (requests, tokens, per 1m, concurrency) loose enough to admit, 32
// goroutines on one key, and the request and token logs growing to the
// run's size as in a real window; then the cost of a refusal.
func BenchmarkLimiter(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	n, workers := envInt("AGENTQ_BENCH_LIMIT_CALLS", 20000), 32
	cfg := limit.Config{Requests: 1 << 30, Tokens: 1 << 40, Per: time.Minute, Concurrency: 1 << 30, Lease: time.Minute}
	l := limit.New(rdb)

	run := func(key string, whole bool) (usPerCall float64, admitted int64) {
		var left atomic.Int64
		left.Store(int64(n))
		cpu0, err := redisCPU(ctx, rdb)
		require.NoError(b, err)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					a, err := l.Admit(ctx, key, cfg)
					if err != nil || !a.Allowed {
						b.Errorf("admit: %v %+v", err, a)
						return
					}
					atomic.AddInt64(&admitted, 1)
					if whole {
						_ = l.Release(ctx, key, a)
						_, _ = l.Debit(ctx, key, cfg, 100)
					}
				}
			}()
		}
		wg.Wait()
		cpu1, err := redisCPU(ctx, rdb)
		require.NoError(b, err)
		return (cpu1 - cpu0) / float64(admitted) * 1e6, admitted
	}
	admitOnly, k1 := run("bench-admit", false)
	whole, k2 := run("bench-call", true)

	// Refusals: a key at its concurrency limit refuses every admission.
	full := limit.Config{Concurrency: 1, Lease: time.Minute}
	_, err := l.Admit(ctx, "bench-full", full)
	require.NoError(b, err)
	cpu0, err := redisCPU(ctx, rdb)
	require.NoError(b, err)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for refused.Add(1) <= int64(n) {
				if a, err := l.Admit(ctx, "bench-full", full); err != nil || a.Allowed {
					b.Errorf("refusal expected: %v %+v", err, a)
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu1, err := redisCPU(ctx, rdb)
	require.NoError(b, err)
	refusal := (cpu1 - cpu0) / float64(n) * 1e6

	report("limiter Redis CPU per admitted call: %.1f µs admission (%d calls), %.1f µs admission+release+debit (%d calls); %.1f µs per refusal",
		admitOnly, k1, whole, k2, refusal)
}
