package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// hlWait is BenchmarkWaitNotify's headline.
const hlWait = "wait notification p50"

// waitRound is one round of BenchmarkWaitNotify.
type waitRound struct {
	cpu       float64 // Redis CPU seconds of the round's window
	lat       []time.Duration
	publishes int64 // SPUBLISH calls in the window
}

// spublishCalls is how many SPUBLISH the server has run (INFO commandstats).
func spublishCalls(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_spublish:calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n, nil
		}
	}
	return 0, nil
}

// waitNotifyRound creates n tasks, then (watched) starts a waiter per task
// on one notifier, or (not watched) none, and writes each task's start and
// success, about 1,000 a second from 4 writers. It measures Redis's CPU
// from before the waiters start to when the last is told (or the last
// write), each waiter's latency from just before its task's terminal
// write, and the SPUBLISH calls.
func waitNotifyRound(ctx context.Context, srv *redistest.Server, n int, watched bool) (waitRound, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return waitRound{}, err
	}
	rec := record.NewStore(rdb)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("t%d", i)
		if _, err := rec.Create(ctx, record.New{ID: ids[i], Seed: record.Seed{Agent: "a", Queue: "default", EnqueuedAt: time.Now()}, State: record.StatePending}); err != nil {
			return waitRound{}, err
		}
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return waitRound{}, err
	}
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return waitRound{}, err
	}
	told := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make(chan error, n+4)
	if watched {
		hub := notify.New(rdb, rec, notify.Options{Logger: discardLogger()})
		hub.Start(ctx)
		defer hub.Stop()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := hub.Wait(ctx, ids[i]); err != nil {
					errs <- err
					return
				}
				told[i] = time.Now()
			}()
		}
		// Every waiter is in place: its task is watched.
		for deadline := time.Now().Add(time.Minute); ; {
			cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, id := range ids {
					p.HGet(ctx, rkeys.Task(id), record.FieldWatch)
				}
				return nil
			})
			all := true
			for _, c := range cmds {
				all = all && c.(*redis.StringCmd).Val() == "1"
			}
			if all {
				break
			}
			if time.Now().After(deadline) {
				return waitRound{}, fmt.Errorf("waiters not in place within a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wrote := make([]time.Time, n)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var wwg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := w; i < n; i += writers {
				<-tick.C
				d := record.Delivery{ID: ids[i], Attempt: 1}
				if _, err := rec.Apply(ctx, d, record.Started()); err != nil {
					errs <- err
					return
				}
				wrote[i] = time.Now()
				if _, err := rec.Apply(ctx, d, record.Succeeded(record.Attempt{Attempt: 1}, nil)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wwg.Wait()
	wg.Wait()
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return waitRound{}, err
	}
	pubs, err := spublishCalls(ctx, rdb)
	if err != nil {
		return waitRound{}, err
	}
	close(errs)
	for err := range errs {
		return waitRound{}, err
	}
	r := waitRound{cpu: cpu1 - cpu0, publishes: pubs}
	if watched {
		for i := range n {
			r.lat = append(r.lat, told[i].Sub(wrote[i]))
		}
	}
	return r, nil
}

// BenchmarkWaitNotify: how soon a waiter hears of its task's end, and what
// that costs Redis. Rounds alternate: n tasks each with one waiter on one
// notifier (subscribe, watch, read, the announcement, the 1 s re-check),
// and the same n tasks and writes with nobody waiting. It prints the
// waiters' latency (p50, p99: from just before the terminal write to the
// waiter's return), the Redis CPU per notified waiter (the watched round's
// CPU less the unwatched one's, over n), and the SPUBLISH calls of the
// unwatched rounds, which must be 0: a task nobody waits for costs Redis
// nothing for notifications. AGENTQ_BENCH_WAITERS sets n (2000).
func BenchmarkWaitNotify(b *testing.B) {
	skipShort(b)
	ctx := context.Background()
	srv := redistest.Start(b)
	n := envInt("AGENTQ_BENCH_WAITERS", 2000)
	const rounds = 3
	var lat []time.Duration
	var watchedCPU, unwatchedCPU []float64
	for range b.N {
		for r := range rounds {
			for _, watched := range []bool{true, false} {
				res, err := waitNotifyRound(ctx, srv, n, watched)
				if err != nil {
					b.Fatal(err)
				}
				if watched {
					lat = append(lat, res.lat...)
					watchedCPU = append(watchedCPU, res.cpu)
				} else {
					unwatchedCPU = append(unwatchedCPU, res.cpu)
					if res.publishes != 0 {
						b.Fatalf("round %d: %d SPUBLISH for %d tasks nobody waits for", r, res.publishes, n)
					}
				}
				detail("round %d watched=%v: Redis CPU %.3fs, SPUBLISH %d", r, watched, res.cpu, res.publishes)
			}
		}
	}
	perWaiter := (median(watchedCPU) - median(unwatchedCPU)) / float64(n) * 1e6
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	report("wait notification: %d waiters x %d rounds: p50 %.2f ms, p99 %.2f ms; Redis CPU per round watched %.3fs, unwatched %.3fs; tasks nobody waits for: 0 SPUBLISH",
		n, rounds, msf(p50), msf(p99), median(watchedCPU), median(unwatchedCPU))
	headline(hlWait, "%.2f ms (p99 %.2f ms); Redis CPU per notified waiter: %.1f µs", msf(p50), msf(p99), perWaiter)
}
