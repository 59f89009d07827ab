package bench

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/worker"
)

// Knobs of TestProfileDelivery (environment variables):
//
//	AGENTQ_PROFILE_SIDE   "agentq" or "asynq" (unset: the test is skipped)
//	AGENTQ_PROFILE_TASKS  tasks (4000)
//	AGENTQ_PROFILE_C      concurrency (200)
//	AGENTQ_PROFILE_DELAY  the HTTP backend's delay (50ms)
//	AGENTQ_PROFILE_MONITOR  file the MONITOR stream is written to (unset: none)
//
// Run it with -cpuprofile/-memprofile to profile one side alone, e.g.
//
//	AGENTQ_PROFILE_SIDE=agentq go test ./bench/ -run TestProfileDelivery -count=1 \
//	    -cpuprofile cpu.out -memprofile mem.out -memprofilerate 512

// TestProfileDelivery runs one side of BenchmarkIOBound (an HTTP agent
// against the backend process of io_backend_test.go) once, alone in the
// process, and prints what one task cost: this process's CPU and
// allocations (the worker's: the backend runs in a process of its own),
// the round trips and commands its go-redis client sent, and
// redis-server's CPU and commandstats per task.
func TestProfileDelivery(t *testing.T) {
	side := envString("AGENTQ_PROFILE_SIDE")
	if side == "" {
		t.Skip("profiling harness: set AGENTQ_PROFILE_SIDE=agentq|asynq")
	}
	n, c := envInt("AGENTQ_PROFILE_TASKS", 4000), envInt("AGENTQ_PROFILE_C", 200)
	delay, err := time.ParseDuration(envString("AGENTQ_PROFILE_DELAY"))
	if err != nil {
		delay = 50 * time.Millisecond
	}
	ctx := context.Background()
	srv := redistest.Start(t)
	be := newIOBackend(t, delay)
	rdb := newClient(srv)
	defer rdb.Close()
	require.NoError(t, prefill(ctx, rdb, n, ioAgent))
	require.NoError(t, pauseQueue(rdb))

	wrdb := newClient(srv)
	defer wrdb.Close()
	rt := &rtCount{}
	wrdb.AddHook(rt)
	if out := envString("AGENTQ_PROFILE_MONITOR"); out != "" {
		defer startMonitor(t, srv, out)()
	}
	stop := startProfiled(t, side, srv, wrdb, be, c)
	_, err = resumeWhenUp(ctx, rdb)
	require.NoError(t, err)

	s0, r0, m0, u0 := mustSnap(t, rdb), rt.rts.Load(), memStats(), procCPU()
	c0 := rt.cmds.Load()
	_, err = waitProcessed(ctx, rdb, int64(n), 5*time.Minute)
	require.NoError(t, err)
	s1, r1, m1, u1 := mustSnap(t, rdb), rt.rts.Load(), memStats(), procCPU()
	c1 := rt.cmds.Load()
	stop()
	require.NoError(t, checkNoFailures(ctx, rdb))

	per := func(x float64) float64 { return x / float64(n) }
	fmt.Printf("side %s: n=%d c=%d delay=%s\n", side, n, c, delay)
	fmt.Printf("  process CPU µs/task %.0f  allocs/task %.0f  bytes/task %.0f\n",
		per((u1-u0)*1e6), per(float64(m1.Mallocs-m0.Mallocs)), per(float64(m1.TotalAlloc-m0.TotalAlloc)))
	fmt.Printf("  client round trips/task %.2f  commands/task %.2f\n", per(float64(r1-r0)), per(float64(c1-c0)))
	fmt.Printf("  redis CPU µs/task %.0f  commands processed/task %.2f\n", per((s1.cpu-s0.cpu)*1e6), per(float64(s1.cmds-s0.cmds)))
	printStats(s0, s1, n)
}

// startProfiled starts the side's server on rdb and returns its stop.
func startProfiled(t *testing.T, side string, srv *redistest.Server, rdb *redis.Client, be *ioBackend, c int) func() {
	t.Helper()
	switch side {
	case "agentq":
		cfg := agentqConfig(srv, c)
		cfg.Agents[ioAgent] = config.Agent{Name: ioAgent, HTTP: &config.HTTP{URL: be.url}, Settings: cfg.Defaults.Clone()}
		w, err := worker.New(cfg, rdb, worker.WithLogger(discardLogger()))
		require.NoError(t, err)
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		return func() { cancel(); require.NoError(t, <-done) }
	case "asynq":
		hc := ioClient(c)
		url := be.url
		s := asynq.NewServerFromRedisClient(rdb, asynqConfig(c, true))
		require.NoError(t, s.Start(asynq.HandlerFunc(func(ctx context.Context, tk *asynq.Task) error {
			return postPayload(ctx, hc, url, tk.Payload())
		})))
		return s.Shutdown
	}
	t.Fatalf("unknown side %q", side)
	return nil
}

func mustSnap(t *testing.T, rdb *redis.Client) redisSnap {
	s, err := readSnap(context.Background(), rdb)
	require.NoError(t, err)
	return s
}

func memStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// procCPU is this process's CPU time (user + system), in seconds.
func procCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// printStats prints the commandstats deltas per task, largest usec first.
func printStats(s0, s1 redisSnap, n int) {
	type row struct {
		name string
		st   cmdStat
	}
	var rows []row
	for k, st := range s1.stats {
		d := cmdStat{calls: st.calls - s0.stats[k].calls, usec: st.usec - s0.stats[k].usec}
		if d.calls > 0 && k != "info" {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].st.usec > rows[j].st.usec })
	for _, r := range rows {
		fmt.Printf("    %-16s calls/task %6.2f  µs/task %6.1f\n", r.name, r.st.calls/float64(n), r.st.usec/float64(n))
	}
}
