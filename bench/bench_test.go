package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// Knobs (environment variables, all optional):
//
//	AGENTQ_BENCH_TASKS            tasks per throughput round (5000)
//	AGENTQ_BENCH_ROUNDS           A/B rounds per throughput comparison (7)
//	AGENTQ_BENCH_LATENCY_SAMPLES  pickup samples of agentq and tuned asynq (200)
//	AGENTQ_BENCH_DEFAULT_SAMPLES  pickup samples of asynq with its defaults (60;
//	                              each costs about a second of asynq's 0.5–1.5s poll)
//	AGENTQ_BENCH_PICKUP_WORKERS   idle agentq worker counts of the pickup benchmark ("1,10,50,100")
//	AGENTQ_BENCH_ENQUEUE_ROUNDS   A/B rounds of the enqueue benchmark (5)
//
// and the idle-cost ones listed in idle_test.go.

// BenchmarkEnqueue measures enqueue throughput against a bare
// asynq.Client enqueue of the same payload (one round trip per task):
// tasks.Client.Enqueue, one task per call, from 1 goroutine (1000 tasks)
// and from 16 (4000 tasks), with a generated ID (the default use) and with
// a caller-chosen one, each against asynq.Client at the same concurrency;
// tasks.Client.EnqueueMany (batches of 1000 from one goroutine) and the
// enqueuer binary (built for the run) with --file on a 10k-line file, whose
// time includes its start-up, parsing and connecting, against asynq.Client
// from 16 goroutines. Each round builds one client (tasks.Client or
// asynq.Client) and its goroutines share it, as a service shares one
// client among its goroutines (the HTTP API does); tasks.Client
// group-commits the concurrent calls of one client.
func BenchmarkEnqueue(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	payload, err := tasks.Encode(&tasks.Envelope{ID: tasks.NewID(), Agent: noopAgent, Params: json.RawMessage(`{"n":1}`), Queue: tasks.DefaultQueue, EnqueuedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	const fileTasks = 10000
	dir := b.TempDir()
	enqueuer := goBuild(b, dir, "github.com/agentq/agentq/cmd/enqueuer")
	file := filepath.Join(dir, "tasks.jsonl")
	var lines strings.Builder
	for range fileTasks {
		lines.WriteString(`{"agent":"` + noopAgent + `","params":{"n":1}}` + "\n")
	}
	if err := os.WriteFile(file, []byte(lines.String()), 0o600); err != nil {
		b.Fatal(err)
	}

	loop := func(goroutines, n int, one func(ctx context.Context, rdb redis.UniversalClient) func() error) func(context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			rdb := newClient(srv)
			defer rdb.Close()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			do := one(ctx, rdb) // one client per round, shared by the goroutines
			start := time.Now()
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(n) {
						if err := do(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			close(errs)
			if err := <-errs; err != nil {
				return 0, err
			}
			return float64(n) / el.Seconds(), nil
		}
	}
	viaClient := func(ctx context.Context, rdb redis.UniversalClient) func() error {
		cl := tasks.NewClient(rdb)
		return func() error {
			_, err := cl.Enqueue(ctx, tasks.Task{Agent: noopAgent, Params: json.RawMessage(`{"n":1}`)})
			return err
		}
	}
	var ids atomic.Int64 // caller-chosen IDs, unique across rounds
	viaClientID := func(ctx context.Context, rdb redis.UniversalClient) func() error {
		cl := tasks.NewClient(rdb)
		return func() error {
			id := "bench-" + strconv.FormatInt(ids.Add(1), 10)
			_, err := cl.Enqueue(ctx, tasks.Task{ID: id, Agent: noopAgent, Params: json.RawMessage(`{"n":1}`)})
			return err
		}
	}
	viaAsynq := func(ctx context.Context, rdb redis.UniversalClient) func() error {
		cl := asynq.NewClientFromRedisClient(rdb)
		return func() error {
			_, err := cl.EnqueueContext(ctx, asynq.NewTask(tasks.TypeName, payload))
			return err
		}
	}
	batched := func(n, batch int) func(context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			rdb := newClient(srv)
			defer rdb.Close()
			cl := tasks.NewClient(rdb)
			ts := make([]tasks.Task, n)
			for i := range ts {
				ts[i] = tasks.Task{Agent: noopAgent, Params: json.RawMessage(`{"n":1}`)}
			}
			start := time.Now()
			for lo := 0; lo < n; lo += batch {
				if _, err := cl.EnqueueMany(ctx, ts[lo:min(lo+batch, n)]); err != nil {
					return 0, err
				}
			}
			return float64(n) / time.Since(start).Seconds(), nil
		}
	}
	binary := func(ctx context.Context) (float64, error) {
		cmd := exec.CommandContext(ctx, enqueuer, "--file", file, "--redis", srv.URL())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("enqueuer --file: %w: %s", err, stderr.String())
		}
		el := time.Since(start)
		rdb := newClient(srv)
		defer rdb.Close()
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(tasks.DefaultQueue)
		if err != nil {
			return 0, err
		}
		if info.Pending != fileTasks {
			return 0, fmt.Errorf("enqueuer --file queued %d tasks, want %d", info.Pending, fileTasks)
		}
		return fileTasks / el.Seconds(), nil
	}
	sides := []side{
		{"asynq.Client g=1", loop(1, 1000, viaAsynq)},
		{"Enqueue g=1", loop(1, 1000, viaClient)},
		{"Enqueue+ID g=1", loop(1, 1000, viaClientID)},
		{"asynq.Client g=16", loop(16, 4000, viaAsynq)},
		{"Enqueue g=16", loop(16, 4000, viaClient)},
		{"Enqueue+ID g=16", loop(16, 4000, viaClientID)},
		{"EnqueueMany", batched(10000, 1000)},
		{"enqueuer --file", binary},
	}
	warm := []side{
		{"warm-asynq", loop(16, 500, viaAsynq)}, {"warm-client", loop(16, 500, viaClient)},
		{"warm-client-id", loop(16, 500, viaClientID)},
		{"warm-many", batched(1000, 1000)}, {"warm-binary", binary},
	}
	res := interleave(b, srv, envInt("AGENTQ_BENCH_ENQUEUE_ROUNDS", 5), warm, sides)
	base := median(res["asynq.Client g=16"])
	for _, s := range sides {
		m := median(res[s.name])
		report("enqueue %-22s %6.0f tasks/s  (%.2f× asynq.Client g=16)", s.name, m, m/base)
		detail("rounds %s: %s", s.name, fmtRates(res[s.name]))
	}
	// Single enqueue, one task per call, against asynq.Client at the same
	// concurrency. The headline is the default use (a generated ID), the
	// lower of the two concurrencies.
	single := 0.0
	for i, g := range []int{1, 16} {
		a := median(res[fmt.Sprintf("asynq.Client g=%d", g)])
		gen, id := median(res[fmt.Sprintf("Enqueue g=%d", g)]), median(res[fmt.Sprintf("Enqueue+ID g=%d", g)])
		report("single enqueue g=%-2d asynq.Client %6.0f tasks/s  Enqueue %6.0f tasks/s (ratio %.2f)  Enqueue with a caller-chosen ID %6.0f tasks/s (ratio %.2f)",
			g, a, gen, gen/a, id, id/a)
		if i == 0 || gen/a < single {
			single = gen / a
		}
	}
	headline(hlEnqueue, "%.2f", single)
}

// BenchmarkRetryTiming measures how close a retry fires to its computed
// delay: an agent fails attempt 1 with a network error (connection
// refused) and succeeds on attempt 2, with initial_backoff 500ms, 1s and
// 2s and no jitter. The delay is taken from the end of attempt 1 (the
// agent returning) to the start of attempt 2 (the agent being called).
func BenchmarkRetryTiming(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	ctx := context.Background()
	cases := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	const perCase, rounds = 4, 3

	type rec struct{ end1, start2 time.Time }
	var mu sync.Mutex
	recs := map[string]*rec{}
	done := make(chan string, 64)
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	flaky := agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		now := time.Now()
		mu.Lock()
		r := recs[req.TaskID]
		if r == nil {
			r = &rec{}
			recs[req.TaskID] = r
		}
		if req.Attempt == 1 {
			r.end1 = time.Now()
			mu.Unlock()
			return nil, refused
		}
		r.start2 = now
		mu.Unlock()
		done <- req.TaskID
		return nil, nil
	})

	cfg := agentqConfig(srv, 20)
	var opts []worker.Option
	name := func(d time.Duration) string { return "flaky-" + d.String() }
	for _, d := range cases {
		s := cfg.Defaults.Clone()
		s.Retry.InitialBackoff, s.Retry.Jitter, s.Retry.MaxAttempts = d, 0, 3
		s.CircuitBreaker.FailureThreshold = 1000 // concurrent first failures must not open it
		cfg.Agents[name(d)] = config.Agent{Name: name(d), Settings: s}
		opts = append(opts, worker.WithAgent(name(d), flaky))
	}
	rdb := newClient(srv)
	defer rdb.Close()
	w, err := worker.New(cfg, rdb, append(opts, worker.WithLogger(discardLogger()))...)
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			b.Error(err)
		}
	}()

	cl := tasks.NewClient(rdb)
	errsBy := map[time.Duration][]time.Duration{}
	for r := range rounds {
		ids := map[string]time.Duration{}
		for i := range perCase * len(cases) {
			d := cases[i%len(cases)]
			time.Sleep(time.Duration(rand.N(int64(25 * time.Millisecond)))) // spread the phase against the 50ms forwarder tick
			res, err := cl.Enqueue(ctx, tasks.Task{Agent: name(d)})
			if err != nil {
				b.Fatal(err)
			}
			ids[res.ID] = d
		}
		deadline := time.After(30 * time.Second)
		for range ids {
			select {
			case <-done:
			case <-deadline:
				b.Fatalf("round %d: retries did not all complete within 30s", r+1)
			}
		}
		for id, d := range ids {
			v, err := cl.Store().Get(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			computed := time.Duration(-1)
			for _, ev := range v.History {
				if ev.Event == tasks.EventRetrying {
					computed = time.Duration(ev.DelayMS) * time.Millisecond
					if ev.ErrorClass != "network_transient" {
						b.Fatalf("task %s: attempt 1 classified %q, want network_transient", id, ev.ErrorClass)
					}
				}
			}
			if computed != d {
				b.Fatalf("task %s: pipeline computed a %s retry delay, want %s (jitter 0)", id, computed, d)
			}
			mu.Lock()
			rc := recs[id]
			mu.Unlock()
			errsBy[d] = append(errsBy[d], rc.start2.Sub(rc.end1)-d)
		}
	}
	for _, d := range cases {
		es := errsBy[d]
		target := max(50*time.Millisecond, d/10)
		within, worst := 0, time.Duration(0)
		for _, e := range es {
			if e.Abs() <= target {
				within++
			}
			worst = max(worst, e.Abs())
		}
		report("retry initial_backoff=%s computed %s  error p50 %+.1fms p95 %+.1fms worst |%s|  target ±%s  within %d/%d",
			d, d, float64(percentile(es, 50))/1e6, float64(percentile(es, 95))/1e6, ms(worst), ms(target), within, len(es))
	}
}

// BenchmarkPickupLatency measures enqueue → agent start on idle workers:
// one task at a time (tasks.Client.Enqueue), a random pause between tasks
// so the enqueue lands at a random point of any poll cycle. agentq with 1,
// 10, 50 and 100 idle workers (AGENTQ_BENCH_PICKUP_WORKERS), each with its
// own go-redis client and the default configuration, against one asynq
// server with its defaults (0.5–1.5s poll) and, for reference, one polling
// every 10ms.
func BenchmarkPickupLatency(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	ctx := context.Background()
	const rounds = 4
	fast := envInt("AGENTQ_BENCH_LATENCY_SAMPLES", 200)
	slow := envInt("AGENTQ_BENCH_DEFAULT_SAMPLES", 60)
	type kind struct {
		name    string
		fleet   string
		workers int
		samples int
		gap     time.Duration
	}
	var kinds []kind
	for _, k := range envInts("AGENTQ_BENCH_PICKUP_WORKERS", []int{1, 10, 50, 100}) {
		name := kindAgentq
		if k > 1 {
			name = fmt.Sprintf("%s×%d", kindAgentq, k)
		}
		kinds = append(kinds, kind{name, kindAgentq, k, fast, 20 * time.Millisecond})
	}
	kinds = append(kinds,
		kind{kindAsynqDefaults, kindAsynqDefaults, 1, slow, 1500 * time.Millisecond},
		kind{"asynq-tuned", kindAsynq10ms, 1, fast, 2 * asynqTunedPoll})
	lat := map[string][]time.Duration{}
	for r := range rounds {
		for _, k := range kinds {
			flush(b, srv)
			n := k.samples / rounds
			if r < k.samples%rounds {
				n++
			}
			got, err := pickupBlock(ctx, srv, k.fleet, k.workers, n, k.gap)
			if err != nil {
				b.Fatalf("round %d %s: %v", r+1, k.name, err)
			}
			lat[k.name] = append(lat[k.name], got...)
		}
	}
	for _, k := range kinds {
		ds := lat[k.name]
		report("pickup latency %-14s p50 %8s  p95 %8s  (n=%d, %d idle worker(s))", k.name, ms(percentile(ds, 50)), ms(percentile(ds, 95)), len(ds), k.workers)
	}
	report("pickup latency p50 ratio (agentq/asynq-defaults): %.3f",
		float64(percentile(lat[kinds[0].name], 50))/float64(percentile(lat[kindAsynqDefaults], 50)))
}

// pickupBlock starts k idle servers of the fleet kind, measures n pickups
// (after one discarded warm-up) and stops them.
func pickupBlock(ctx context.Context, srv *redistest.Server, kind string, k, n int, gap time.Duration) ([]time.Duration, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	started := make(chan time.Time, 1)
	f, err := startFleet(ctx, srv, kind, k, func() {
		select {
		case started <- time.Now():
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	cl := tasks.NewClient(rdb)
	var out []time.Duration
	for i := 0; i <= n && err == nil; i++ {
		time.Sleep(time.Duration(rand.N(int64(gap))))
		t0 := time.Now()
		if _, err = cl.Enqueue(ctx, tasks.Task{Agent: noopAgent}); err != nil {
			break
		}
		select {
		case t := <-started:
			if i > 0 {
				out = append(out, t.Sub(t0))
			}
		case <-time.After(10 * time.Second):
			err = errors.New("task not picked up within 10s")
		}
		if err == nil {
			_, err = waitProcessed(ctx, rdb, int64(i+1), 10*time.Second)
		}
	}
	if serr := f.stop(); err == nil {
		err = serr
	}
	return out, err
}

// BenchmarkBreakerGate measures the pipeline's throughput with the
// circuit-breaker gate (one Allow per task; Record is free on the happy
// path) against the same pipeline built WithoutBreaker, at concurrency 50.
func BenchmarkBreakerGate(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	n, rounds, c := envInt("AGENTQ_BENCH_TASKS", 5000), envInt("AGENTQ_BENCH_ROUNDS", 7), 50
	with := side{"with", func(ctx context.Context) (float64, error) { return runAgentq(ctx, srv, c, n) }}
	without := side{"without", func(ctx context.Context) (float64, error) {
		return runAgentq(ctx, srv, c, n, worker.WithoutBreaker())
	}}
	warm := []side{
		{"warm-with", func(ctx context.Context) (float64, error) { return runAgentq(ctx, srv, c, n/10) }},
		{"warm-without", func(ctx context.Context) (float64, error) {
			return runAgentq(ctx, srv, c, n/10, worker.WithoutBreaker())
		}},
	}
	res := interleave(b, srv, rounds, warm, []side{with, without})
	mw, mo := median(res["with"]), median(res["without"])
	report("c=%d agentq with breaker %.0f tasks/s  without %.0f tasks/s", c, mw, mo)
	detail("rounds with: %s | without: %s", fmtRates(res["with"]), fmtRates(res["without"]))
	report("breaker gate cost ratio (with/without): %.2f", mw/mo)
}

// BenchmarkThroughput measures the whole agentq pipeline (worker.New + Run,
// a no-op Go agent) against a plain asynq server with a no-op handler, on
// the same redis-server, over the same prefilled tasks (enqueue time
// excluded), at concurrency 10 and 50. "asynq" has agentq's poll and
// forward intervals; "asynq-defaults" has asynq's own.
func BenchmarkThroughput(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	n, rounds := envInt("AGENTQ_BENCH_TASKS", 5000), envInt("AGENTQ_BENCH_ROUNDS", 7)
	var ratio, cpuRatio float64
	for _, c := range []int{10, 50} {
		aq := side{"asynq", func(ctx context.Context) (float64, error) { return runAsynq(ctx, srv, c, n, true) }}
		ag := side{"agentq", func(ctx context.Context) (float64, error) { return runAgentq(ctx, srv, c, n) }}
		ad := side{"asynq-defaults", func(ctx context.Context) (float64, error) { return runAsynq(ctx, srv, c, n, false) }}
		warm := []side{
			{"warm-asynq", func(ctx context.Context) (float64, error) { return runAsynq(ctx, srv, c, n/10, true) }},
			{"warm-agentq", func(ctx context.Context) (float64, error) { return runAgentq(ctx, srv, c, n/10) }},
		}
		sides := []side{aq, ag, ad}
		if c == 50 {
			// Decomposition: plain asynq whose handler adds agentq's task
			// bookkeeping: the one write the pipeline now makes per quick
			// task, and the two (Begin, then Transition) it used to make.
			sides = append(sides,
				side{"asynq+store", func(ctx context.Context) (float64, error) {
					return runAsynqWith(ctx, srv, c, n, true, storeWork(false))
				}},
				side{"asynq+store2", func(ctx context.Context) (float64, error) {
					return runAsynqWith(ctx, srv, c, n, true, storeWork(true))
				}})
		}
		res := interleave(b, srv, rounds, warm, sides)
		ma, mg, md := median(res["asynq"]), median(res["agentq"]), median(res["asynq-defaults"])
		report("c=%d asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f", c, ma, mg, mg/ma)
		report("c=%d asynq-defaults %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f", c, md, mg, mg/md)
		for _, s := range sides {
			detail("rounds (n=%d) %-16s %s", n, s.name+":", fmtRates(res[s.name]))
		}
		ra, rg := median(res["asynq"+redisSuffix]), median(res["agentq"+redisSuffix])
		report("c=%d Redis CPU per task: asynq %.1fµs  agentq %.1fµs (+%.1fµs)", c, ra, rg, rg-ra)
		if c == 50 {
			ratio, cpuRatio = mg/ma, rg/ra
			ms, m2 := median(res["asynq+store"]), median(res["asynq+store2"])
			report("c=%d decomposition (ratio to asynq): +one write per task %.2f  +two writes (before) %.2f  full pipeline %.2f", c, ms/ma, m2/ma, mg/ma)
		}
	}
	// Both headlines are the c=50 comparison against asynq with the same
	// intervals: the throughput ratio, and agentq's Redis CPU per task
	// over asynq's (medians of the rounds; lower is better).
	headline(hlCPUPerTask, "%.2f", cpuRatio)
	headline(hlThroughput, "%.2f", ratio)
}
