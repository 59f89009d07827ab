package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// Knobs of BenchmarkCluster (environment variables, optional):
//
//	AGENTQ_BENCH_CLUSTER_TASKS   tasks per queue per throughput round (1000; the one-queue
//	                             rounds put all 6000 on one queue)
//	AGENTQ_BENCH_CLUSTER_ROUNDS  A/B rounds per comparison (5)

// clusterQueues is the number of queues (one no-op agent each) of the
// cluster throughput rounds; clusterConcurrency the concurrency of every
// server (BenchmarkThroughput's headline concurrency).
const (
	clusterQueues      = 6
	clusterConcurrency = 50
)

// BenchmarkCluster measures the whole agentq pipeline against a plain asynq
// server on a 6-node Redis Cluster (3 masters, 3 replicas) and on one
// standalone redis-server:
//
//  1. throughput with 6 queues (one no-op agent per queue, 2 queues per
//     master), agentq and asynq on each topology, with the Redis CPU per
//     task summed over the masters;
//  2. the Redis CPU per task of the master serving one queue, with tasks on
//     that queue only: asynq's queue keys are all on it, agentq's own task
//     records and breakers are spread over the masters by task ID and key.
//
// Rounds are interleaved (agentq, asynq, …), every master is flushed before
// each, tasks are prefilled into paused queues, and the clock runs from the
// first handler call to the n-th completion counted by asynq.
func BenchmarkCluster(b *testing.B) {
	skipShort(b)
	ctx := context.Background()
	cl := redistest.StartCluster(b)
	srv := redistest.Start(b)
	perQ, rounds := envInt("AGENTQ_BENCH_CLUSTER_TASKS", 1000), envInt("AGENTQ_BENCH_CLUSTER_ROUNDS", 5)

	queues, where := balancedQueues(b, cl, clusterQueues)
	masters := cl.Masters(b)
	clusterRedis := config.Default().Redis
	clusterRedis.URL, clusterRedis.Cluster = "", &config.Cluster{Addrs: cl.Addrs()}
	standaloneRedis := config.Default().Redis
	standaloneRedis.URL = srv.URL()
	ct := newTopo("cluster", clusterRedis, masters)
	defer ct.close()
	st := newTopo("standalone", standaloneRedis, []string{srv.Addr})
	defer st.close()
	detail("queues: %s", where)
	detail("cluster nodes run appendonly everysec with a replica each; the standalone server has neither")

	// 1. Throughput, 6 queues, both topologies.
	all := func(tp *topo, kind string, perQ int) topoSide {
		return topoSide{tp.name + " " + kind, tp, func(ctx context.Context) (topoRound, error) {
			return runTopo(ctx, tp, kind, queues, perQ, clusterConcurrency, "")
		}}
	}
	warm := []topoSide{all(ct, "agentq", perQ/10), all(ct, "asynq", perQ/10), all(st, "agentq", perQ/10), all(st, "asynq", perQ/10)}
	sides := []topoSide{all(ct, "agentq", perQ), all(ct, "asynq", perQ), all(st, "agentq", perQ), all(st, "asynq", perQ)}
	res := interleaveTopo(b, ctx, rounds, warm, sides)
	n := perQ * len(queues)
	rate := func(name string) float64 {
		return median(field(res[name], func(r topoRound) float64 { return r.rate }))
	}
	cpu := func(name string) float64 {
		return median(field(res[name], func(r topoRound) float64 { return r.cpuUS }))
	}
	cg, ca, sg, sa := rate("cluster agentq"), rate("cluster asynq"), rate("standalone agentq"), rate("standalone asynq")
	report("cluster c=%d %d queues: asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f", clusterConcurrency, len(queues), ca, cg, cg/ca)
	report("standalone c=%d %d queues: asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f", clusterConcurrency, len(queues), sa, sg, sg/sa)
	report("cluster/standalone throughput: asynq %.2f  agentq %.2f", ca/sa, cg/sg)
	report("Redis CPU per task (all masters): cluster asynq %.1fµs agentq %.1fµs | standalone asynq %.1fµs agentq %.1fµs",
		cpu("cluster asynq"), cpu("cluster agentq"), cpu("standalone asynq"), cpu("standalone agentq"))
	for _, s := range sides {
		detail("rounds (n=%d) %-18s tasks/s %s  Redis µs/task %s", n, s.name+":",
			fmtRates(field(res[s.name], func(r topoRound) float64 { return r.rate })),
			fmtFloats(field(res[s.name], func(r topoRound) float64 { return r.cpuUS }), 1))
	}

	// 2. CPU of the shard holding one queue, tasks on that queue only.
	q := queues[0]
	shard := cl.MasterOf(b, "asynq:{"+q+"}:pending")
	if !slices.Contains(masters, shard) {
		b.Fatalf("queue %s's master %s is none of the masters %v", q, shard, masters)
	}
	one := func(kind string) topoSide {
		return topoSide{"shard " + kind, ct, func(ctx context.Context) (topoRound, error) {
			return runTopo(ctx, ct, kind, []string{q}, perQ*len(queues), clusterConcurrency, shard)
		}}
	}
	brk := rkeys.Breaker(queueAgent(q))
	detail("queue %s: asynq keys on %s; agentq's breaker %s on %s; task records spread by ID over all %d masters",
		q, shard, brk, cl.MasterOf(b, brk), len(masters))
	shardSides := []topoSide{one("agentq"), one("asynq")}
	sres := interleaveTopo(b, ctx, rounds, nil, shardSides)
	shardUS := func(name string) float64 {
		return median(field(sres[name], func(r topoRound) float64 { return r.shardUS }))
	}
	otherUS := func(name string) float64 {
		return median(field(sres[name], func(r topoRound) float64 { return r.cpuUS - r.shardUS }))
	}
	sg1, sa1 := shardUS("shard agentq"), shardUS("shard asynq")
	report("queue %s only: Redis CPU per task on its master %s: asynq %.1fµs  agentq %.1fµs; other masters: asynq %.1fµs  agentq %.1fµs",
		q, shard, sa1, sg1, otherUS("shard asynq"), otherUS("shard agentq"))
	for _, s := range shardSides {
		detail("rounds (n=%d, queue %s) %-13s tasks/s %s  queue-shard µs/task %s", perQ*len(queues), q, s.name+":",
			fmtRates(field(sres[s.name], func(r topoRound) float64 { return r.rate })),
			fmtFloats(field(sres[s.name], func(r topoRound) float64 { return r.shardUS }), 1))
	}
	report("queue shard CPU agentq/asynq: %.2f", sg1/sa1)
	report("cluster pipeline/asynq throughput ratio: %.2f", cg/ca)
}

// balancedQueues picks k queue names q0, q1, … (skipping some) whose asynq
// keys (hash tag {queue}) spread evenly over the cluster's masters, and
// describes which master serves which.
func balancedQueues(tb testing.TB, cl *redistest.Cluster, k int) ([]string, string) {
	tb.Helper()
	masters := cl.Masters(tb)
	per := (k + len(masters) - 1) / len(masters)
	count := map[string]int{}
	by := map[string][]string{}
	var out []string
	for i := 0; len(out) < k; i++ {
		if i > 200 {
			tb.Fatalf("no %d queues spread over %d masters among q0…q%d", k, len(masters), i)
		}
		q := fmt.Sprintf("q%d", i)
		m := cl.MasterOf(tb, "asynq:{"+q+"}:pending")
		if count[m] < per {
			count[m]++
			by[m] = append(by[m], q)
			out = append(out, q)
		}
	}
	var w []string
	for _, m := range masters {
		w = append(w, m+" "+strings.Join(by[m], ","))
	}
	return out, strings.Join(w, " | ")
}

// topo is one Redis deployment under test: the Redis block both sides'
// clients are opened from, and one plain client per master for FLUSHALL
// and INFO cpu.
type topo struct {
	name    string
	redis   config.Redis
	masters []string
	nodes   []*redis.Client
}

func newTopo(name string, r config.Redis, masters []string) *topo {
	tp := &topo{name: name, redis: r, masters: masters}
	for _, a := range masters {
		tp.nodes = append(tp.nodes, redis.NewClient(&redis.Options{Addr: a, DialTimeout: 3 * time.Second, ContextTimeoutEnabled: true}))
	}
	return tp
}

func (tp *topo) close() {
	for _, c := range tp.nodes {
		_ = c.Close()
	}
}

// flush runs FLUSHALL on every master.
func (tp *topo) flush(ctx context.Context) error {
	for i, c := range tp.nodes {
		if err := c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL %s: %w", tp.masters[i], err)
		}
	}
	return nil
}

// cpu returns each master's CPU time (seconds), in masters' order.
func (tp *topo) cpu(ctx context.Context) ([]float64, error) {
	out := make([]float64, len(tp.nodes))
	for i, c := range tp.nodes {
		v, err := redisCPU(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("INFO cpu %s: %w", tp.masters[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// topoRound is the outcome of one timed round.
type topoRound struct {
	rate    float64 // tasks/s
	cpuUS   float64 // Redis CPU per task, summed over the masters (µs)
	shardUS float64 // Redis CPU per task of the master asked for (µs)
}

// topoSide is a contender of interleaveTopo: run does one round on its
// flushed topology.
type topoSide struct {
	name string
	tp   *topo
	run  func(ctx context.Context) (topoRound, error)
}

// interleaveTopo is interleave for topologies: warm-up rounds (discarded),
// then rounds of every side in turn, flushing every master of the side's
// topology before each.
func interleaveTopo(b *testing.B, ctx context.Context, rounds int, warm, sides []topoSide) map[string][]topoRound {
	b.Helper()
	for _, s := range warm {
		if err := s.tp.flush(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := s.run(ctx); err != nil {
			b.Fatalf("warm-up %s: %v", s.name, err)
		}
	}
	out := map[string][]topoRound{}
	for r := range rounds {
		for _, s := range sides {
			if err := s.tp.flush(ctx); err != nil {
				b.Fatal(err)
			}
			v, err := s.run(ctx)
			if err != nil {
				b.Fatalf("round %d %s: %v", r+1, s.name, err)
			}
			out[s.name] = append(out[s.name], v)
		}
	}
	return out
}

// field extracts one figure of each round.
func field(rs []topoRound, f func(topoRound) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// fmtFloats renders figures with prec decimals as "a b c".
func fmtFloats(xs []float64, prec int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.*f", prec, x)
	}
	return strings.Join(parts, " ")
}

// queueAgent is the no-op agent whose tasks go to queue q.
func queueAgent(q string) string { return noopAgent + "-" + q }

// prefillQueues enqueues perQ tasks on each queue (for its queueAgent) with
// tasks.Client.EnqueueMany, the queues interleaved, in batches of 1000.
func prefillQueues(ctx context.Context, rdb redis.UniversalClient, queues []string, perQ int) error {
	cl := tasks.NewClient(rdb)
	n := perQ * len(queues)
	for lo := 0; lo < n; lo += 1000 {
		ts := make([]tasks.Task, min(1000, n-lo))
		for i := range ts {
			q := queues[(lo+i)%len(queues)]
			ts[i] = tasks.Task{Agent: queueAgent(q), Queue: q, Params: json.RawMessage(`{"n":1}`)}
		}
		if _, err := cl.EnqueueMany(ctx, ts); err != nil {
			return err
		}
	}
	return nil
}

// sumCounters adds up one of asynq's per-queue counters (key(q)) over
// queues, in one pipeline.
func sumCounters(ctx context.Context, rdb redis.UniversalClient, queues []string, key func(string) string) (int64, error) {
	cmds := make([]*redis.StringCmd, len(queues))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range queues {
			cmds[i] = p.Get(ctx, key(q))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var total int64
	for _, c := range cmds {
		n, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func processedOf(q string) string { return "asynq:{" + q + "}:processed" }
func failedOf(q string) string    { return "asynq:{" + q + "}:failed" }

// waitQueuesProcessed is waitProcessed over several queues: it polls the
// sum of their processed counters (every 1ms) until it reaches n.
func waitQueuesProcessed(ctx context.Context, rdb redis.UniversalClient, queues []string, n int64, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, err := sumCounters(ctx, rdb, queues, processedOf)
		if err != nil {
			return time.Time{}, err
		}
		if got >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("only %d of %d tasks processed within %s", got, n, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// runTopo is one round on tp: perQ tasks prefilled on each of queues
// (paused), then a server of kind ("agentq": worker.New + Run with one
// no-op agent per queue; "asynq": a plain asynq server with a no-op
// handler and the tuned intervals) serving those queues at concurrency c.
// Once it has registered with asynq, the masters' CPU is noted and the
// queues resumed; the rate runs from the first handler call to the n-th
// completion. shard, when set, is the master whose CPU is reported apart.
func runTopo(ctx context.Context, tp *topo, kind string, queues []string, perQ, c int, shard string) (topoRound, error) {
	rdb, err := tp.redis.NewClient(nil)
	if err != nil {
		return topoRound{}, err
	}
	defer rdb.Close()
	n := perQ * len(queues)
	if err := prefillQueues(ctx, rdb, queues, perQ); err != nil {
		return topoRound{}, fmt.Errorf("prefill: %w", err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range queues {
		if err := insp.PauseQueue(q); err != nil {
			return topoRound{}, err
		}
	}
	served := map[string]int{}
	for _, q := range queues {
		served[q] = 1
	}
	var first firstMark
	var stop func() error
	switch kind {
	case "agentq":
		cfg := config.Default()
		cfg.Redis = tp.redis
		cfg.Worker.Concurrency, cfg.Worker.ShutdownTimeout, cfg.Worker.Queues = c, 5*time.Second, served
		noop := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
			first.hit()
			return nil, nil
		})
		opts := []worker.Option{worker.WithLogger(discardLogger())}
		for _, q := range queues {
			name := queueAgent(q)
			cfg.Agents[name] = config.Agent{Name: name, Queue: q, Settings: cfg.Defaults.Clone()}
			opts = append(opts, worker.WithAgent(name, noop))
		}
		w, err := worker.New(cfg, rdb, opts...)
		if err != nil {
			return topoRound{}, err
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		stop = func() error { cancel(); return <-done }
	case "asynq":
		acfg := asynqConfig(c, true)
		acfg.Queues = served
		s := asynq.NewServerFromRedisClient(rdb, acfg)
		if err := s.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
			first.hit()
			return nil
		})); err != nil {
			return topoRound{}, err
		}
		stop = func() error { s.Shutdown(); return nil }
	default:
		return topoRound{}, fmt.Errorf("unknown side kind %q", kind)
	}

	var out topoRound
	err = func() error {
		if err := waitServers(ctx, rdb, 1, nil); err != nil {
			return err
		}
		cpu0, err := tp.cpu(ctx)
		if err != nil {
			return err
		}
		for _, q := range queues {
			if err := insp.UnpauseQueue(q); err != nil {
				return err
			}
		}
		end, err := waitQueuesProcessed(ctx, rdb, queues, int64(n), 2*time.Minute)
		if err != nil {
			return err
		}
		cpu1, err := tp.cpu(ctx)
		if err != nil {
			return err
		}
		out.rate = float64(n) / end.Sub(first.time()).Seconds()
		for i, a := range tp.masters {
			d := (cpu1[i] - cpu0[i]) / float64(n) * 1e6
			out.cpuUS += d
			if a == shard {
				out.shardUS = d
			}
		}
		return nil
	}()
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return topoRound{}, err
	}
	if f, err := sumCounters(ctx, rdb, queues, failedOf); err != nil {
		return topoRound{}, err
	} else if f != 0 {
		return topoRound{}, fmt.Errorf("%d tasks failed during a throughput run", f)
	}
	return out, nil
}
