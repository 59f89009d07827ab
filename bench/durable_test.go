package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// Durable runs' benchmarks (#37 §4): what waiting tasks cost an idle
// fleet's Redis (BenchmarkWaitingIdle) and how soon a signal resumes a
// waiting task (BenchmarkResumeLatency). Knobs (environment, optional):
//
//	AGENTQ_BENCH_WAITING          waiting tasks (100000)
//	AGENTQ_BENCH_WAITING_WORKERS  idle fleet size (10)
//	AGENTQ_BENCH_WAITING_WINDOWS  measuring windows per side (3)
//	AGENTQ_BENCH_IDLE_SETTLE      settle before Redis alone's windows (2s)
//	AGENTQ_BENCH_WAITING_SETTLE   settle before the fleet's windows (20s:
//	                              the fill's one-off after-work is not idle cost)
//	AGENTQ_BENCH_IDLE_WINDOW      one window (5s)
//	AGENTQ_BENCH_RESUMES          resumed tasks (200)
//	AGENTQ_BENCH_RESUME_WORKERS   idle workers of the resume benchmark (4)

// The durable benchmarks' headlines.
const (
	hlWaiting = "waiting tasks idle-fleet Redis CPU with/without ratio" // BenchmarkWaitingIdle
	hlResume  = "signal resume latency p50"                             // BenchmarkResumeLatency
)

// suspendAgent is the Go agent of the durable benchmarks: a run that
// follows no suspend waits for the signal "go" for timeout; a resumed run
// calls resumed (may be nil) with its task ID and succeeds. running counts
// the calls in flight (the worker slots its tasks hold).
type suspendAgent struct {
	timeout time.Duration
	resumed func(id string)
	running atomic.Int64
}

// suspendSignal is the signal suspendAgent's tasks wait for.
const suspendSignal = "go"

func (s *suspendAgent) Call(_ context.Context, req agent.Request) (json.RawMessage, error) {
	s.running.Add(1)
	defer s.running.Add(-1)
	if req.Resume == 0 {
		return nil, agent.Suspend(agent.Wait{Signal: suspendSignal, Timeout: s.timeout})
	}
	if s.resumed != nil {
		s.resumed(req.TaskID)
	}
	return json.RawMessage(`"done"`), nil
}

// suspendAgentName is the name suspendAgent is registered under.
const suspendAgentName = "suspender"

// startSuspendFleet starts k workers (the default configuration, as
// BenchmarkIdleCost's, with concurrency c), each with its own go-redis
// client, running a (suspendAgentName), and returns once all have
// registered.
func startSuspendFleet(ctx context.Context, srv *redistest.Server, k, c int, a *suspendAgent) (*fleet, error) {
	f := &fleet{rt: &rtCount{}}
	for range k {
		rdb := newClient(srv)
		rdb.AddHook(f.rt)
		f.rdbs = append(f.rdbs, rdb)
		w, err := worker.New(agentqConfig(srv, c), rdb, worker.WithLogger(discardLogger()),
			worker.WithAgent(suspendAgentName, agent.Func(a.Call)))
		if err != nil {
			_ = f.stop()
			return nil, err
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		f.stops = append(f.stops, func() error { cancel(); return <-done })
	}
	if err := waitServerCount(ctx, srv, k); err != nil {
		_ = f.stop()
		return nil, err
	}
	return f, nil
}

// waitingIDs are the IDs of n benchmark tasks ("w000001" …).
func waitingIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%06d", prefix, i+1)
	}
	return ids
}

// enqueueSuspenders enqueues one suspendAgent task per ID with
// tasks.Client.EnqueueMany, in batches of 1000.
func enqueueSuspenders(ctx context.Context, rdb redis.UniversalClient, ids []string) error {
	cl := tasks.NewClient(rdb)
	for lo := 0; lo < len(ids); lo += 1000 {
		batch := ids[lo:min(lo+1000, len(ids))]
		ts := make([]tasks.Task, len(batch))
		for i, id := range batch {
			ts[i] = tasks.Task{ID: id, Agent: suspendAgentName, Params: json.RawMessage(`{"n":1}`)}
		}
		res, err := cl.EnqueueMany(ctx, ts)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Duplicate {
				return fmt.Errorf("task %s exists already", r.ID)
			}
		}
	}
	return nil
}

// stateCounts reads every task's record state (pipelined HGETs, 1000 a
// round trip) and counts them by state ("" for no record).
func stateCounts(ctx context.Context, rdb redis.UniversalClient, ids []string) (map[string]int, error) {
	out := map[string]int{}
	for lo := 0; lo < len(ids); lo += 1000 {
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range ids[lo:min(lo+1000, len(ids))] {
				p.HGet(ctx, rkeys.Task(id), record.FieldState)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, err
		}
		for _, c := range cmds {
			out[c.(*redis.StringCmd).Val()]++
		}
	}
	return out, nil
}

// waitAllWaiting polls (every 200ms, up to timeout) until every task of
// ids is in state waiting: first the scheduled set's size (cheap), then
// every record.
func waitAllWaiting(ctx context.Context, rdb redis.UniversalClient, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sched := "asynq:{" + tasks.DefaultQueue + "}:scheduled"
	var last map[string]int
	for {
		n, err := rdb.ZCard(ctx, sched).Result()
		if err != nil {
			return err
		}
		if n >= int64(len(ids)) {
			if last, err = stateCounts(ctx, rdb, ids); err != nil {
				return err
			}
			if last[string(tasks.StateWaiting)] == len(ids) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not all %d tasks waiting within %s: scheduled %d, states %v", len(ids), timeout, n, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkNoSlots makes sure the waiting tasks hold nothing: asynq's pending
// and active lists of the queue are empty, no server reports an active
// worker (asynq's heartbeat), and no agent call is in flight.
func checkNoSlots(ctx context.Context, rdb redis.UniversalClient, a *suspendAgent) (string, error) {
	q := "asynq:{" + tasks.DefaultQueue + "}:"
	pending, err := rdb.LLen(ctx, q+"pending").Result()
	if err != nil {
		return "", err
	}
	active, err := rdb.LLen(ctx, q+"active").Result()
	if err != nil {
		return "", err
	}
	servers, err := asynq.NewInspectorFromRedisClient(rdb).Servers()
	if err != nil {
		return "", err
	}
	busy := 0
	for _, s := range servers {
		busy += len(s.ActiveWorkers)
	}
	running := a.running.Load()
	got := fmt.Sprintf("asynq pending %d, active %d; active workers (asynq heartbeat) %d of %d servers; agent calls in flight %d",
		pending, active, busy, len(servers), running)
	if pending != 0 || active != 0 || busy != 0 || running != 0 {
		return got, fmt.Errorf("waiting tasks hold worker slots: %s", got)
	}
	return got, nil
}

// waitNoSlots is checkNoSlots until it passes (every 100ms, up to 20s):
// asynq's heartbeat rewrites a server's active workers every 5s, so the
// last tasks' workers show as active until the next beat.
func waitNoSlots(ctx context.Context, rdb redis.UniversalClient, a *suspendAgent) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := checkNoSlots(ctx, rdb, a)
		if err == nil || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// idleSide is one side's measuring windows: Redis CPU (ms/s, whole
// server) and commands/s per window, and the commandstats (per second)
// of all windows together.
type idleSide struct {
	cpu, cmds []float64
	stats     map[string]cmdStat
}

// idleWindows measures n windows after settling.
func idleWindows(ctx context.Context, rdb redis.UniversalClient, n int, settle, window time.Duration) (idleSide, error) {
	time.Sleep(settle)
	first, err := readSnap(ctx, rdb)
	if err != nil {
		return idleSide{}, err
	}
	var out idleSide
	s0 := first
	for range n {
		time.Sleep(window)
		s1, err := readSnap(ctx, rdb)
		if err != nil {
			return idleSide{}, err
		}
		sec := s1.at.Sub(s0.at).Seconds()
		out.cpu = append(out.cpu, (s1.cpu-s0.cpu)*1000/sec)
		out.cmds = append(out.cmds, float64(s1.cmds-s0.cmds)/sec)
		s0 = s1
	}
	sec := s0.at.Sub(first.at).Seconds()
	out.stats = map[string]cmdStat{}
	for c, st := range s0.stats {
		if d := st.calls - first.stats[c].calls; d > 0 {
			out.stats[c] = cmdStat{calls: d / sec, usec: (st.usec - first.stats[c].usec) / sec}
		}
	}
	return out, nil
}

// usedMemory reads INFO memory's used_memory (bytes).
func usedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory has no used_memory")
}

// BenchmarkWaitingIdle (#37 §4): N waiting tasks on one Redis hold no
// worker slot, and an idle fleet's Redis CPU with them waiting is no
// higher than without them. On one redis-server, in one run:
//
//  1. Redis alone (no fleet, no tasks): AGENTQ_BENCH_WAITING_WINDOWS
//     windows of Redis CPU (whole server, ms/s), the control of step 5;
//  2. an idle fleet of AGENTQ_BENCH_WAITING_WORKERS agentq workers (the
//     default configuration) running suspendAgent: the same windows;
//  3. N tasks (AGENTQ_BENCH_WAITING) are enqueued (EnqueueMany) and the
//     fleet runs each into `waiting` by the real path (the agent
//     suspends on a signal with a 24 h timeout: the next run goes to
//     asynq's scheduled set, the record to `waiting`), timed from the
//     first enqueue to the last record waiting; then it checks that
//     every record is `waiting` and nothing holds a slot (asynq's
//     pending and active lists empty, no active worker in any server's
//     heartbeat, no agent call in flight), and reads Redis's used_memory
//     growth per waiting task;
//  4. the idle fleet with the N tasks waiting: the same windows (and the
//     slot check again);
//  5. the fleet stopped, Redis alone with the N tasks: the same windows
//     (what the data set costs Redis itself: expiry, rehashing).
//
// It prints the figures, the commands/s and commandstats of steps 2 and
// 4, and the ratio of 4 to 2 (the headline).
func BenchmarkWaitingIdle(b *testing.B) {
	skipShort(b)
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := newClient(srv)
	defer rdb.Close()
	n := envInt("AGENTQ_BENCH_WAITING", 100000)
	k := envInt("AGENTQ_BENCH_WAITING_WORKERS", 10)
	nw := envInt("AGENTQ_BENCH_WAITING_WINDOWS", 3)
	settle := envDuration("AGENTQ_BENCH_IDLE_SETTLE", 2*time.Second)
	window := envDuration("AGENTQ_BENCH_IDLE_WINDOW", 5*time.Second)
	fleetSettle := envDuration("AGENTQ_BENCH_WAITING_SETTLE", 20*time.Second)
	measure := func(settle time.Duration) idleSide {
		side, err := idleWindows(ctx, rdb, nw, settle, window)
		if err != nil {
			b.Fatal(err)
		}
		return side
	}
	alone := measure(settle)
	a := &suspendAgent{timeout: 24 * time.Hour}
	f, err := startSuspendFleet(ctx, srv, k, config.DefaultConcurrency, a)
	if err != nil {
		b.Fatal(err)
	}
	without := measure(fleetSettle)
	fill, err := fillWaiting(ctx, rdb, a, waitingIDs("w", n))
	if err != nil {
		_ = f.stop()
		b.Fatal(err)
	}
	with := measure(fleetSettle)
	if _, err = checkNoSlots(ctx, rdb, a); err != nil { // still none after the windows
		_ = f.stop()
		b.Fatal(err)
	}
	if err := f.stop(); err != nil {
		b.Fatal(err)
	}
	aloneWith := measure(settle)
	report("waiting tasks: %d run into `waiting` by %d workers (c=%d each) in %.1fs (%.0f tasks/s, enqueue included); all %d records waiting; %s",
		n, k, config.DefaultConcurrency, fill.took.Seconds(), float64(n)/fill.took.Seconds(), n, fill.slots)
	report("waiting tasks: Redis used_memory +%.1f MiB, %.0f bytes per waiting task", float64(fill.mem)/(1<<20), float64(fill.mem)/float64(n))
	report("waiting tasks: Redis CPU (whole server, median of %d windows of %s; fleet sides after %s settling): alone %.3f ms/s, alone with %d waiting %.3f ms/s; idle fleet of %d without %.3f ms/s, with %d waiting %.3f ms/s",
		nw, window, fleetSettle, median(alone.cpu), n, median(aloneWith.cpu), k, median(without.cpu), n, median(with.cpu))
	report("waiting tasks: idle fleet's commands/s without %.1f, with %.1f; commandstats (calls/s, µs/s) without: %s; with: %s",
		median(without.cmds), median(with.cmds), topCalls(without.stats, 1, 8), topCalls(with.stats, 1, 8))
	detail("windows (ms/s) alone: %s | fleet without: %s | fleet with: %s | alone with: %s",
		fmtFloats(alone.cpu, 3), fmtFloats(without.cpu, 3), fmtFloats(with.cpu, 3), fmtFloats(aloneWith.cpu, 3))
	detail("windows (commands/s) fleet without: %s | fleet with: %s", fmtFloats(without.cmds, 1), fmtFloats(with.cmds, 1))
	headline(hlWaiting, "%s (%.3f vs %.3f ms/s, %d waiting, 0 slots held)",
		fmtRatio(median(with.cpu), median(without.cpu)), median(with.cpu), median(without.cpu), n)
}

// filled is what fillWaiting did: how long it took, Redis's used_memory
// growth (bytes) and the slot check's figures.
type filled struct {
	took  time.Duration
	mem   int64
	slots string
}

// fillWaiting enqueues a suspendAgent task per ID, waits until every one
// is waiting, and then until no slot is held (waitNoSlots).
func fillWaiting(ctx context.Context, rdb redis.UniversalClient, a *suspendAgent, ids []string) (filled, error) {
	mem0, err := usedMemory(ctx, rdb)
	if err != nil {
		return filled{}, err
	}
	start := time.Now()
	if err := enqueueSuspenders(ctx, rdb, ids); err != nil {
		return filled{}, err
	}
	if err := waitAllWaiting(ctx, rdb, ids, 30*time.Minute); err != nil {
		return filled{}, err
	}
	out := filled{took: time.Since(start)}
	mem1, err := usedMemory(ctx, rdb)
	if err != nil {
		return filled{}, err
	}
	out.mem = mem1 - mem0
	out.slots, err = waitNoSlots(ctx, rdb, a)
	return out, err
}

// BenchmarkResumeLatency (#37 §4): from a signal to the resumed run's
// attempt starting, with idle workers. K tasks (AGENTQ_BENCH_RESUMES) run
// into `waiting` on the signal "go"; then, one at a time, the benchmark
// takes the time, sends the task its signal (tasks.Client.Signal: the
// signal's script, then the run made due and the queue woken), and the
// Go agent takes the time when the resumed run's attempt starts
// (Request.Resume > 0), in the same process (one clock). The next signal
// goes once the task has succeeded, so every resume finds the workers
// idle. It prints p50/p90/p99/max, and the Signal call's own duration.
//
// The children half of the figure (the last child's terminal write to
// the parent's next attempt) is BenchmarkFanOut's.
func BenchmarkResumeLatency(b *testing.B) {
	skipShort(b)
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := newClient(srv)
	defer rdb.Close()
	n := envInt("AGENTQ_BENCH_RESUMES", 200)
	k := envInt("AGENTQ_BENCH_RESUME_WORKERS", 4)
	started := make(chan time.Time, 1)
	a := &suspendAgent{timeout: time.Hour, resumed: func(string) { started <- time.Now() }}
	f, err := startSuspendFleet(ctx, srv, k, config.DefaultConcurrency, a)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := f.stop(); err != nil {
			b.Error(err)
		}
	}()
	ids := waitingIDs("r", n)
	if _, err := fillWaiting(ctx, rdb, a, ids); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // the fleet idle again
	lat, call, err := resumeEach(ctx, rdb, ids, started)
	if err != nil {
		b.Fatal(err)
	}
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	report("signal resume latency (signal sent → resumed attempt started), %d tasks one at a time, %d idle workers: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; the Signal call itself p50 %.2f ms, p99 %.2f ms",
		n, k, msf(percentile(lat, 50)), msf(percentile(lat, 90)), msf(percentile(lat, 99)), msf(percentile(lat, 100)),
		msf(percentile(call, 50)), msf(percentile(call, 99)))
	headline(hlResume, "%.2f ms (p99 %.2f ms, max %.2f ms; %d resumes, idle workers)",
		msf(percentile(lat, 50)), msf(percentile(lat, 99)), msf(percentile(lat, 100)), n)
}

// resumeEach signals each task in turn and returns each resume's latency
// (just before Signal → the resumed attempt's start) and each Signal
// call's duration; it waits for the task's success before the next.
func resumeEach(ctx context.Context, rdb redis.UniversalClient, ids []string, started <-chan time.Time) (lat, call []time.Duration, err error) {
	cl := tasks.NewClient(rdb)
	for _, id := range ids {
		t0 := time.Now()
		res, err := cl.Signal(ctx, id, suspendSignal, json.RawMessage(`{"ok":true}`))
		if err != nil {
			return nil, nil, err
		}
		call = append(call, time.Since(t0))
		if !res.Resumed {
			return nil, nil, fmt.Errorf("signal to %s resumed nothing: %+v", id, res)
		}
		select {
		case t := <-started:
			lat = append(lat, t.Sub(t0))
		case <-time.After(time.Minute):
			return nil, nil, fmt.Errorf("%s never resumed", id)
		}
		if err := waitState(ctx, rdb, id, tasks.StateSucceeded, time.Minute); err != nil {
			return nil, nil, err
		}
	}
	return lat, call, nil
}

// waitState polls (every millisecond) until task id's record is in state.
func waitState(ctx context.Context, rdb redis.UniversalClient, id string, state tasks.State, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := rdb.HGet(ctx, rkeys.Task(id), record.FieldState).Result()
		if err != nil && err != redis.Nil {
			return err
		}
		if got == string(state) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s is %q, not %s, after %s", id, got, state, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
