package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
)

// BenchmarkBreakerRecord measures what the shared breaker costs Redis: the
// CPU redis-server spends (INFO cpu) per recorded call — Allow and Record
// of a started Breakers (local CLOSED view live, successes batched while
// they may be), 32 goroutines on one key, 1000 distinct tasks — in rate
// mode (the default) and consecutive mode (the mode before it), for a
// healthy backend and for one failing 35% of calls. Neither mode opens.
func BenchmarkBreakerRecord(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	n, workers := envInt("AGENTQ_BENCH_BREAKER_CALLS", 20000), 32
	rate := breaker.Config{Mode: breaker.ModeRate}
	consecutive := breaker.Config{Mode: breaker.ModeConsecutive, FailureThreshold: 1 << 30}

	run := func(key string, cfg breaker.Config, failPct int) float64 {
		br := breaker.New(rdb)
		br.Start(ctx)
		defer br.Stop()
		// Let the subscription come up, as in a running worker.
		require.Eventually(b, func() bool {
			_, err := br.Allow(ctx, key, cfg)
			return err == nil
		}, 5*time.Second, 10*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
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
					adm, err := br.Allow(ctx, key, cfg)
					if err != nil || !adm.Allowed {
						b.Errorf("allow: %v %+v", err, adm)
						return
					}
					out := breaker.OutcomeSuccess
					if rand.IntN(100) < failPct {
						out = breaker.OutcomeFailure
					}
					st, err := br.Record(ctx, key, cfg, adm, out, breaker.ForTask(fmt.Sprint("task-", rand.IntN(1000))))
					if err != nil || st != breaker.StateClosed {
						b.Errorf("record: %v %s", err, st)
						return
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(b, br.Flush(ctx))
		cpu1, err := redisCPU(ctx, rdb)
		require.NoError(b, err)
		return (cpu1 - cpu0) / float64(n) * 1e6
	}
	rateFlaky := run("bench-rate-flaky", rate, 35)
	consFlaky := run("bench-consecutive-flaky", consecutive, 35)
	rateOK := run("bench-rate-ok", rate, 0)
	consOK := run("bench-consecutive-ok", consecutive, 0)
	report("breaker Redis CPU per recorded call: rate %.1f µs, consecutive %.1f µs (35%% failures, %d calls); healthy backend: rate %.1f µs, consecutive %.1f µs",
		rateFlaky, consFlaky, n, rateOK, consOK)
}
