package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// failedKey is asynq's counter of the default queue's handler calls that
// returned an error (asynq's key layout, which its internal/base package
// owns; processedOf and failedOf name any queue's).
const failedKey = "asynq:{" + tasks.DefaultQueue + "}:failed"

// noopAgent is the name the no-op agent is registered under.
const noopAgent = "noop"

// summary collects the lines TestMain prints after every benchmark, so
// that a run ends with its headline figures.
var summary struct {
	mu        sync.Mutex
	lines     []string
	headlines map[string]string // headline name → its line, printed last in headlineOrder
}

// The headline figures: each benchmark prints its own line (headline) as
// "<name>: <figure>"; the summary ends with them in this order, and so
// does `make bench` (the Makefile greps the last line of each).
const (
	hlIdle       = "idle Redis CPU per worker"                 // BenchmarkIdleCost
	hlEnqueue    = "single enqueue/asynq ratio"                // BenchmarkEnqueue
	hlProcs      = "pipeline/asynq 4-process throughput ratio" // BenchmarkThroughputProcs
	hlCPUPerTask = "pipeline/asynq Redis CPU per task ratio"   // BenchmarkThroughput
	hlThroughput = "pipeline/asynq throughput ratio"           // BenchmarkThroughput
)

// hlWait ("wait notification p50", BenchmarkWaitNotify) is printed first.

var headlineOrder = []string{hlWait, hlIdle, hlEnqueue, hlProcs, hlCPUPerTask, hlThroughput, hlIO50, hlIO200, hlIOCPU, hlWaiting, hlResume, hlFanOut}

// headline prints a headline line now and keeps it for the end of the
// summary.
func headline(name, format string, args ...any) {
	line := name + ": " + fmt.Sprintf(format, args...)
	fmt.Println(line)
	summary.mu.Lock()
	if summary.headlines == nil {
		summary.headlines = map[string]string{}
	}
	summary.headlines[name] = line
	summary.mu.Unlock()
}

// report prints a result line now and keeps it for the summary.
func report(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Println(line)
	summary.mu.Lock()
	summary.lines = append(summary.lines, line)
	summary.mu.Unlock()
}

// detail prints a line that is not part of the summary (raw rounds).
func detail(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		// A child process of a multi-process benchmark (see procs_test.go).
		os.Exit(childMain(role))
	}
	code := m.Run()
	summary.mu.Lock()
	if len(summary.lines) > 0 || len(summary.headlines) > 0 {
		fmt.Println("=== summary ===")
		for _, l := range summary.lines {
			fmt.Println(l)
		}
		for _, h := range headlineOrder {
			if l, ok := summary.headlines[h]; ok {
				fmt.Println(l)
			}
		}
	}
	summary.mu.Unlock()
	os.Exit(code)
}

// skipShort skips a benchmark under -short (make unit): each puts
// thousands of tasks through real redis-server processes for seconds.
func skipShort(b *testing.B) {
	if testing.Short() {
		b.Skip("benchmark: seconds of load on real redis-server processes; skipped with -short (make unit)")
	}
}

// envString reads a knob from the environment ("" when unset).
func envString(name string) string { return os.Getenv(name) }

// envInt reads a positive integer knob from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// newClient returns a go-redis client set up like the worker command's
// (cli.OpenRedis): context deadlines on, default pool.
func newClient(srv *redistest.Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 3 * time.Second, ContextTimeoutEnabled: true})
}

// flush empties the server between rounds.
func flush(tb testing.TB, srv *redistest.Server) {
	tb.Helper()
	c := newClient(srv)
	defer c.Close()
	require.NoError(tb, c.FlushAll(context.Background()).Err())
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// quietAsynq is an asynq.Logger that drops everything.
type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(...any) {}

// agentqConfig is the worker configuration every agentq side uses: the
// seed values (poll 10ms, forward 50ms) with concurrency c.
func agentqConfig(srv *redistest.Server, c int) *config.Config {
	cfg := config.Default()
	cfg.Redis.URL = srv.URL()
	cfg.Worker.Concurrency = c
	cfg.Worker.ShutdownTimeout = 5 * time.Second
	return cfg
}

// The plain asynq server's "tuned" intervals: 10ms poll, 50ms forwarder
// (what agentq's worker used by default when the benchmarks were written;
// kept as literals so the baseline does not move with agentq's defaults).
const (
	asynqTunedPoll    = 10 * time.Millisecond
	asynqTunedForward = 50 * time.Millisecond
)

// asynqConfig is the plain asynq server's configuration: with tuned, a
// 10ms poll and a 50ms forwarder (asynqTunedPoll, asynqTunedForward: the
// agentq worker's intervals when these benchmarks were written); else
// asynq's defaults (1s poll, 5s forwarder).
func asynqConfig(c int, tuned bool) asynq.Config {
	cfg := asynq.Config{
		Concurrency: c, Queues: map[string]int{tasks.DefaultQueue: 1},
		Logger: quietAsynq{}, LogLevel: asynq.FatalLevel, ShutdownTimeout: 5 * time.Second,
	}
	if tuned {
		cfg.TaskCheckInterval = asynqTunedPoll
		cfg.DelayedTaskCheckInterval = asynqTunedForward
	}
	return cfg
}

// prefill enqueues n tasks for agent (noopAgent when empty) with
// tasks.Client.EnqueueMany (the agentq envelope, the task record, asynq's
// task), in batches of 1000.
func prefill(ctx context.Context, rdb redis.UniversalClient, n int, agentName ...string) error {
	name := noopAgent
	if len(agentName) > 0 {
		name = agentName[0]
	}
	cl := tasks.NewClient(rdb)
	for lo := 0; lo < n; lo += 1000 {
		ts := make([]tasks.Task, min(1000, n-lo))
		for i := range ts {
			ts[i] = tasks.Task{Agent: name, Params: json.RawMessage(`{"n":1}`)}
		}
		if _, err := cl.EnqueueMany(ctx, ts); err != nil {
			return err
		}
	}
	return nil
}

// counter reads one of asynq's integer counters (0 when absent).
func counter(ctx context.Context, rdb redis.UniversalClient, key string) (int64, error) {
	n, err := rdb.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// waitProcessed polls asynq's processed counter until it reaches n and
// returns when it saw it; 1ms polling, bounded by timeout.
func waitProcessed(ctx context.Context, rdb redis.UniversalClient, n int64, timeout time.Duration) (time.Time, error) {
	return waitQueuesProcessed(ctx, rdb, []string{tasks.DefaultQueue}, n, timeout)
}

// checkNoFailures makes sure a throughput run measured successes only.
func checkNoFailures(ctx context.Context, rdb redis.UniversalClient) error {
	f, err := counter(ctx, rdb, failedKey)
	if err != nil {
		return err
	}
	if f != 0 {
		return fmt.Errorf("%d tasks failed during a throughput run", f)
	}
	return nil
}

// firstMark remembers the first time it is hit.
type firstMark struct{ ns atomic.Int64 }

func (f *firstMark) hit() { f.ns.CompareAndSwap(0, time.Now().UnixNano()) }
func (f *firstMark) time() time.Time {
	return time.Unix(0, f.ns.Load())
}

// side is one contender of an A/B comparison: run does one timed round on
// a flushed server and returns its figure.
type side struct {
	name string
	run  func(ctx context.Context) (float64, error)
}

// interleave runs warm-up rounds (discarded) and then rounds of every side
// in turn (A, B, A, B, …), flushing Redis before each, and returns each
// side's figures.
func interleave(b *testing.B, srv *redistest.Server, rounds int, warm []side, sides []side) map[string][]float64 {
	b.Helper()
	ctx := context.Background()
	for _, s := range warm {
		flush(b, srv)
		if _, err := s.run(ctx); err != nil {
			b.Fatalf("warm-up %s: %v", s.name, err)
		}
	}
	out := map[string][]float64{}
	for r := range rounds {
		for _, s := range sides {
			flush(b, srv)
			redisUS, enqUS = 0, 0
			v, err := s.run(ctx)
			if err != nil {
				b.Fatalf("round %d %s: %v", r+1, s.name, err)
			}
			out[s.name] = append(out[s.name], v)
			if redisUS > 0 {
				out[s.name+redisSuffix] = append(out[s.name+redisSuffix], redisUS)
			}
			if enqUS > 0 {
				out[s.name+enqSuffix] = append(out[s.name+enqSuffix], enqUS)
			}
		}
	}
	return out
}

// redisUS is the Redis CPU per task (µs) of the last timed round that
// measured it (runAgentq, runAsynqWith); interleave files it under the
// side's name + redisSuffix. Rounds run one at a time.
var redisUS float64

const redisSuffix = "/redis-us"

// enqUS is the Redis CPU per task (µs) of the last round's enqueue
// (runAgentqFill), filed under the side's name + enqSuffix.
var enqUS float64

const enqSuffix = "/enq-us"

// pauseQueue pauses the default queue, so that a server can start (and
// its start-up Redis work happen) before the timed part begins.
func pauseQueue(rdb redis.UniversalClient) error {
	return asynq.NewInspectorFromRedisClient(rdb).PauseQueue(tasks.DefaultQueue)
}

// resumeWhenUp waits until a server has registered with asynq
// (waitServers), notes Redis's CPU time and resumes the default queue: the
// timed part of a round starts there.
func resumeWhenUp(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	if err := waitServers(ctx, rdb, 1, nil); err != nil {
		return 0, err
	}
	cpu, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, err
	}
	return cpu, asynq.NewInspectorFromRedisClient(rdb).UnpauseQueue(tasks.DefaultQueue)
}

// redisCPU is the CPU time (user + system, seconds) redis-server has used.
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += f
		}
	}
	return total, nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// fmtRates renders figures as "a b c".
func fmtRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

// ms renders a duration in milliseconds with one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// noopReply is what the no-op agent of runAgentq answers (nil: nothing);
// BenchmarkUsage sets it to a provider's reply with usage. Rounds run one
// at a time.
var noopReply json.RawMessage

// runAgentq runs a worker with the no-op agent over n prefilled tasks and
// returns tasks/s from the first agent call to the n-th completion seen by
// asynq.
func runAgentq(ctx context.Context, srv *redistest.Server, c, n int, opts ...worker.Option) (float64, error) {
	return runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
		return prefill(ctx, rdb, n)
	}, opts...)
}

// runAgentqFill is runAgentq over the tasks fill enqueues (n of them); it
// notes the Redis CPU per task of the fill in enqUS.
func runAgentqFill(ctx context.Context, srv *redistest.Server, c, n int, fill func(context.Context, redis.UniversalClient) error,
	opts ...worker.Option) (float64, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	e0, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, err
	}
	if err := fill(ctx, rdb); err != nil {
		return 0, err
	}
	e1, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, err
	}
	enqUS = (e1 - e0) / float64(n) * 1e6
	var first firstMark
	reply := noopReply
	noop := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		first.hit()
		return reply, nil
	})
	opts = append([]worker.Option{worker.WithAgent(noopAgent, noop), worker.WithLogger(discardLogger())}, opts...)
	w, err := worker.New(agentqConfig(srv, c), rdb, opts...)
	if err != nil {
		return 0, err
	}
	if err := pauseQueue(rdb); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	cpu0, err := resumeWhenUp(ctx, rdb)
	if err != nil {
		cancel()
		<-done
		return 0, err
	}
	end, werr := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
	cpu1, cerr := redisCPU(ctx, rdb)
	cancel()
	if err := <-done; err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, werr
	}
	if cerr != nil {
		return 0, cerr
	}
	if err := checkNoFailures(ctx, rdb); err != nil {
		return 0, err
	}
	redisUS = (cpu1 - cpu0) / float64(n) * 1e6
	return float64(n) / end.Sub(first.time()).Seconds(), nil
}

// runAsynq is runAgentq's twin: a plain asynq server whose handler does
// nothing, over the same prefilled tasks.
func runAsynq(ctx context.Context, srv *redistest.Server, c, n int, tuned bool) (float64, error) {
	return runAsynqWith(ctx, srv, c, n, tuned, nil)
}

// runAsynqWith is runAsynq whose handler also does work(ctx, task) after
// noting its first call: the decomposition sides use it to add one piece
// of agentq's per-task Redis work at a time.
func runAsynqWith(ctx context.Context, srv *redistest.Server, c, n int, tuned bool,
	work func(rdb redis.UniversalClient) func(context.Context, *asynq.Task) error) (float64, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	if err := prefill(ctx, rdb, n); err != nil {
		return 0, err
	}
	var first firstMark
	do := func(context.Context, *asynq.Task) error { return nil }
	if work != nil {
		do = work(rdb)
	}
	s := asynq.NewServerFromRedisClient(rdb, asynqConfig(c, tuned))
	if err := pauseQueue(rdb); err != nil {
		return 0, err
	}
	if err := s.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		first.hit()
		return do(ctx, t)
	})); err != nil {
		return 0, err
	}
	cpu0, err := resumeWhenUp(ctx, rdb)
	if err != nil {
		s.Shutdown()
		return 0, err
	}
	end, werr := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
	cpu1, cerr := redisCPU(ctx, rdb)
	s.Shutdown()
	if werr != nil {
		return 0, werr
	}
	if cerr != nil {
		return 0, cerr
	}
	redisUS = (cpu1 - cpu0) / float64(n) * 1e6
	if err := checkNoFailures(ctx, rdb); err != nil {
		return 0, err
	}
	return float64(n) / end.Sub(first.time()).Seconds(), nil
}

// storeWork is agentq's per-task bookkeeping without the rest of the
// pipeline: decode the envelope and record the attempt's success, either
// as the pipeline does for a quick first delivery (one checked write of
// start and outcome) or, with split, as it does for a long one (the start
// before the call, the outcome after it: two writes).
func storeWork(split bool) func(rdb redis.UniversalClient) func(context.Context, *asynq.Task) error {
	return func(rdb redis.UniversalClient) func(context.Context, *asynq.Task) error {
		st := record.NewStore(rdb)
		return func(ctx context.Context, t *asynq.Task) error {
			env, err := tasks.Decode(t.Payload())
			if err != nil {
				return err
			}
			d := record.Delivery{ID: env.ID, Run: env.Run, Restarts: env.Restarts, Attempt: 1, Seed: record.SeedOf(env)}
			ok := record.Succeeded(record.Attempt{Attempt: 1, Agent: env.Agent}, nil)
			if split {
				if _, err := st.Apply(ctx, d, record.Started()); err != nil {
					return err
				}
			}
			_, err = st.Apply(ctx, d, ok)
			return err
		}
	}
}

func TestMedianAndPercentile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, tc.want, median(tc.xs), 1e-9)
		})
	}
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}} {
		require.Equal(t, tc.want, percentile(ds, tc.p), "p%v", tc.p)
	}
	require.Zero(t, percentile(nil, 50))
}
