package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/worker"
)

// Knobs of the idle-cost benchmark (environment variables, all optional):
//
//	AGENTQ_BENCH_IDLE_ROUNDS   interleaved rounds (3)
//	AGENTQ_BENCH_IDLE_SETTLE   wait after the workers are up, before the window (2s)
//	AGENTQ_BENCH_IDLE_WINDOW   measuring window (5s; asynq's defaults tick every 5s)
//	AGENTQ_BENCH_IDLE_WORKERS  idle worker counts ("1,10,50")

// The kinds of idle fleet the Redis-cost benchmarks start.
const (
	kindAgentq        = "agentq"         // worker.New + Run, config defaults, one no-op Go agent
	kindAsynqDefaults = "asynq-defaults" // asynq.Server with asynq's own intervals (1s poll, 5s forwarder)
	kindAsynq10ms     = "asynq-10ms"     // asynq.Server polling every 10ms, forwarding every 50ms
)

// rtCount counts what one fleet's go-redis clients send: round trips (one
// per command, one per pipeline or MULTI/EXEC) and commands. It is a
// go-redis hook, so it sees every call the worker or asynq makes through
// the client it was given; a blocking command (BLPOP …) is one round trip
// however long it blocks. Pub/Sub traffic does not pass through hooks.
type rtCount struct{ rts, cmds atomic.Int64 }

func (c *rtCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rtCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.rts.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *rtCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.rts.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// fleet is k idle servers of one kind, each with its own go-redis client
// (as separate processes would have), all counted by one rtCount.
type fleet struct {
	rt    *rtCount
	stops []func() error
	rdbs  []*redis.Client
}

// stop shuts every server down (in parallel) and closes the clients; it
// returns the first error.
func (f *fleet) stop() error {
	errs := make(chan error, len(f.stops))
	for _, s := range f.stops {
		go func() { errs <- s() }()
	}
	var first error
	for range f.stops {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for _, c := range f.rdbs {
		_ = c.Close()
	}
	return first
}

// startFleet starts k servers of kind (kindAgentq, kindAsynqDefaults,
// kindAsynq10ms) with the default concurrency on the default queue; each
// calls onTask (may be nil) when it runs a task. It returns once all k have
// registered with asynq (their heartbeat).
func startFleet(ctx context.Context, srv *redistest.Server, kind string, k int, onTask func()) (*fleet, error) {
	f := &fleet{rt: &rtCount{}}
	if onTask == nil {
		onTask = func() {}
	}
	for range k {
		rdb := newClient(srv)
		rdb.AddHook(f.rt)
		f.rdbs = append(f.rdbs, rdb)
		switch kind {
		case kindAgentq:
			w, err := newIdleWorker(srv, rdb, onTask)
			if err != nil {
				_ = f.stop()
				return nil, err
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(rctx) }()
			f.stops = append(f.stops, func() error { cancel(); return <-done })
		case kindAsynqDefaults, kindAsynq10ms:
			s := asynq.NewServerFromRedisClient(rdb, asynqConfig(config.DefaultConcurrency, kind == kindAsynq10ms))
			if err := s.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { onTask(); return nil })); err != nil {
				_ = f.stop()
				return nil, err
			}
			f.stops = append(f.stops, func() error { s.Shutdown(); return nil })
		default:
			_ = f.stop()
			return nil, fmt.Errorf("unknown fleet kind %q", kind)
		}
	}
	if err := waitServerCount(ctx, srv, k); err != nil {
		_ = f.stop()
		return nil, err
	}
	return f, nil
}

// newIdleWorker is an agentq worker with the default configuration
// (agentqConfig at the default concurrency) and the no-op Go agent.
func newIdleWorker(srv *redistest.Server, rdb redis.UniversalClient, onTask func()) (*worker.Worker, error) {
	noop := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		onTask()
		return nil, nil
	})
	return worker.New(agentqConfig(srv, config.DefaultConcurrency), rdb, worker.WithLogger(discardLogger()), worker.WithAgent(noopAgent, noop))
}

// waitServerCount waits until at least n asynq servers have announced
// themselves (any process), for up to a minute.
func waitServerCount(ctx context.Context, srv *redistest.Server, n int) error {
	rdb := newClient(srv)
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(time.Minute)
	for {
		ss, err := insp.Servers()
		if err != nil {
			return err
		}
		if len(ss) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d servers started within a minute", len(ss), n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// redisSnap is one reading of redis-server's counters (one INFO call).
type redisSnap struct {
	at    time.Time
	cpu   float64            // used_cpu_user + used_cpu_sys, seconds
	cmds  int64              // total_commands_processed (a script's redis.call()s count too)
	stats map[string]cmdStat // commandstats per command
}

// cmdStat is one command's commandstats entry. A command run by a script
// is listed under its own name as well as inside the EVALSHA's usec.
type cmdStat struct{ calls, usec float64 }

// readSnap reads INFO cpu, stats and commandstats in one call.
func readSnap(ctx context.Context, rdb redis.UniversalClient) (redisSnap, error) {
	info, err := rdb.Info(ctx, "cpu", "stats", "commandstats").Result()
	s := redisSnap{at: time.Now(), stats: map[string]cmdStat{}}
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, fmt.Errorf("INFO %s: %w", k, err)
			}
			s.cpu += f
		case k == "total_commands_processed":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("INFO %s: %w", k, err)
			}
			s.cmds = n
		case strings.HasPrefix(k, "cmdstat_"):
			var st cmdStat
			for _, kv := range strings.Split(v, ",") {
				f, x, _ := strings.Cut(kv, "=")
				switch f {
				case "calls":
					st.calls, _ = strconv.ParseFloat(x, 64)
				case "usec":
					st.usec, _ = strconv.ParseFloat(x, 64)
				}
			}
			s.stats[strings.TrimPrefix(k, "cmdstat_")] = st
		}
	}
	return s, nil
}

// idleRound is one measuring window of one setup, as rates per second
// (whole setup, not yet per worker or baseline-subtracted).
type idleRound struct {
	cpuMS float64            // Redis process CPU, ms per second
	cmds  float64            // commands processed per second (scripts' inner commands count)
	rts   float64            // the fleet's round trips per second (client side)
	stats map[string]cmdStat // commandstats deltas per second
}

// idleWindow starts k servers of kind (none for the baseline) on a flushed
// server, lets them settle, and measures one window.
func idleWindow(ctx context.Context, srv *redistest.Server, kind string, k int, settle, window time.Duration) (idleRound, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return idleRound{}, err
	}
	f := &fleet{rt: &rtCount{}}
	if k > 0 {
		var err error
		if f, err = startFleet(ctx, srv, kind, k, nil); err != nil {
			return idleRound{}, err
		}
	}
	r, err := func() (idleRound, error) {
		time.Sleep(settle)
		s0, err := readSnap(ctx, rdb)
		if err != nil {
			return idleRound{}, err
		}
		rt0 := f.rt.rts.Load()
		time.Sleep(window)
		s1, err := readSnap(ctx, rdb)
		if err != nil {
			return idleRound{}, err
		}
		rt1 := f.rt.rts.Load()
		sec := s1.at.Sub(s0.at).Seconds()
		r := idleRound{
			cpuMS: (s1.cpu - s0.cpu) * 1000 / sec,
			cmds:  float64(s1.cmds-s0.cmds) / sec,
			rts:   float64(rt1-rt0) / sec,
			stats: map[string]cmdStat{},
		}
		for c, st := range s1.stats {
			if d := st.calls - s0.stats[c].calls; d > 0 {
				r.stats[c] = cmdStat{calls: d / sec, usec: (st.usec - s0.stats[c].usec) / sec}
			}
		}
		return r, nil
	}()
	if serr := f.stop(); err == nil {
		err = serr
	}
	return r, err
}

// BenchmarkIdleCost measures what idle workers cost their Redis: k idle
// agentq workers (worker.New + Run with the default configuration, one
// no-op Go agent, the default queue) against k plain asynq servers with
// asynq's defaults (1s poll, 5s forwarder) and with a 10ms poll (50ms
// forwarder), for k = 1, 10 and 50, in interleaved rounds on one
// redis-server, each server with its own go-redis client. Each setup
// settles for AGENTQ_BENCH_IDLE_SETTLE after all k have registered, then
// one window of AGENTQ_BENCH_IDLE_WINDOW is measured. Per worker, after
// subtracting the baseline (the same window with no workers):
//
//   - Redis CPU: redis-server's used_cpu_user + used_cpu_sys (INFO cpu),
//     ms of CPU per second: everything Redis spends, networking included;
//   - round trips/s: counted on the workers' go-redis clients (a hook: one
//     per command or pipeline; a blocking command is one however long it
//     blocks);
//   - commands/s: INFO stats total_commands_processed, which counts every
//     command, including each redis.call() inside a script and each
//     command of a pipeline: it is not a round-trip count.
//
// The commandstats breakdown of each side at the largest k is printed
// underneath (calls/s per worker).
func BenchmarkIdleCost(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	ctx := context.Background()
	rounds := envInt("AGENTQ_BENCH_IDLE_ROUNDS", 3)
	settle := envDuration("AGENTQ_BENCH_IDLE_SETTLE", 2*time.Second)
	window := envDuration("AGENTQ_BENCH_IDLE_WINDOW", 5*time.Second)
	counts := envInts("AGENTQ_BENCH_IDLE_WORKERS", []int{1, 10, 50})
	kinds := []string{kindAgentq, kindAsynqDefaults, kindAsynq10ms}

	key := func(kind string, k int) string { return fmt.Sprintf("%s×%d", kind, k) }
	res := map[string][]idleRound{}
	for r := range rounds {
		w, err := idleWindow(ctx, srv, "", 0, settle, window)
		if err != nil {
			b.Fatalf("round %d baseline: %v", r+1, err)
		}
		res["baseline"] = append(res["baseline"], w)
		for _, k := range counts {
			for i := range kinds {
				kind := kinds[(i+r)%len(kinds)] // each kind leads in turn
				w, err := idleWindow(ctx, srv, kind, k, settle, window)
				if err != nil {
					b.Fatalf("round %d %s: %v", r+1, key(kind, k), err)
				}
				res[key(kind, k)] = append(res[key(kind, k)], w)
			}
		}
	}
	med := func(rs []idleRound, f func(idleRound) float64) float64 { return median(field2(rs, f)) }
	cpu := func(r idleRound) float64 { return r.cpuMS }
	cmds := func(r idleRound) float64 { return r.cmds }
	rts := func(r idleRound) float64 { return r.rts }
	base := res["baseline"]
	bc, bn := med(base, cpu), med(base, cmds)
	report("idle baseline (no workers): Redis CPU %.2f ms/s  commands %.1f/s  (window %s, settle %s, median of %d rounds)",
		bc, bn, window, settle, rounds)
	perWorker := map[string]float64{}
	for _, k := range counts {
		for _, kind := range kinds {
			rs := res[key(kind, k)]
			pc := (med(rs, cpu) - bc) / float64(k)
			perWorker[key(kind, k)] = pc
			report("idle %-14s ×%-3d per worker: Redis CPU %6.3f ms/s  round trips %7.1f/s  commands %7.1f/s",
				kind, k, pc, med(rs, rts)/float64(k), (med(rs, cmds)-bn)/float64(k))
			detail("rounds %s: CPU ms/s (whole Redis) %s | round trips/s %s", key(kind, k),
				fmtFloats(field2(rs, cpu), 2), fmtFloats(field2(rs, rts), 1))
		}
	}
	top := counts[len(counts)-1]
	for _, kind := range kinds {
		detail("commandstats %s per worker (last round; calls/s, µs/s; a script's commands also count in its EVALSHA): %s",
			key(kind, top), topCalls(res[key(kind, top)][rounds-1].stats, top, 8))
	}
	for _, k := range counts {
		report("idle ×%d Redis CPU per worker agentq/asynq-10ms: %s  agentq/asynq-defaults: %s", k,
			fmtRatio(perWorker[key(kindAgentq, k)], perWorker[key(kindAsynq10ms, k)]),
			fmtRatio(perWorker[key(kindAgentq, k)], perWorker[key(kindAsynqDefaults, k)]))
	}
	worst := 0.0
	for _, k := range counts {
		worst = max(worst, perWorker[key(kindAgentq, k)])
	}
	report("idle agentq Redis CPU per worker, worst of ×%s: %.2f ms/s", joinInts(counts, "/×"), worst)
	// The headline is the 10-worker figure (the count closest to 10 when
	// the knob leaves 10 out): a fleet's per-worker cost, with the
	// baseline's noise divided by 10. The single-worker figure carries the
	// baseline's whole noise; the worst of all counts is printed above.
	hk := counts[0]
	for _, k := range counts {
		if absInt(k-10) < absInt(hk-10) {
			hk = k
		}
	}
	headline(hlIdle, "%.2f ms/s", perWorker[key(kindAgentq, hk)])
}

// field2 extracts one figure of each idle round.
func field2(rs []idleRound, f func(idleRound) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// topCalls renders the n most called commands, per worker: calls/s and
// µs of command time per second.
func topCalls(stats map[string]cmdStat, k, n int) string {
	type kv struct {
		c  string
		st cmdStat
	}
	var xs []kv
	for c, st := range stats {
		if c == "info" {
			continue // the measurement's own
		}
		xs = append(xs, kv{c, cmdStat{st.calls / float64(k), st.usec / float64(k)}})
	}
	sort.Slice(xs, func(i, j int) bool {
		return xs[i].st.calls > xs[j].st.calls || xs[i].st.calls == xs[j].st.calls && xs[i].c < xs[j].c
	})
	var parts []string
	for _, x := range xs[:min(n, len(xs))] {
		parts = append(parts, fmt.Sprintf("%s %.1f (%.0fµs)", x.c, x.st.calls, x.st.usec))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// fmtRatio renders a/b, or "n/a" when b is not positive (a baseline-
// subtracted cost can be 0 or below within the noise).
func fmtRatio(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// envInts reads a comma-separated list of positive integers.
func envInts(name string, def []int) []int {
	var out []int
	for _, f := range strings.Split(envString(name), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return def
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func joinInts(xs []int, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, sep)
}
