package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// Child processes of the multi-process benchmarks are this test binary run
// again with these environment variables set; TestMain hands them to
// childMain instead of running tests.
const (
	roleEnv  = "AGENTQ_BENCH_ROLE"  // roleAgentq or roleAsynq
	redisEnv = "AGENTQ_BENCH_REDIS" // redis-server address (host:port)
	concEnv  = "AGENTQ_BENCH_CONC"  // concurrency of the child's server

	roleAgentq = "agentq" // a worker (worker.New + Run) with the no-op Go agent
	roleAsynq  = "asynq"  // a plain asynq server with a no-op handler
)

// procs is the number of processes of the multi-process benchmarks.
const procs = 4

// childMain runs one server of the given role until its stdin closes (the
// parent closes it, or dies), then shuts it down; it returns the exit
// status.
func childMain(role string) int {
	c, _ := strconv.Atoi(os.Getenv(concEnv))
	if c <= 0 {
		c = config.DefaultConcurrency
	}
	srv := &redistest.Server{Addr: os.Getenv(redisEnv)}
	rdb := newClient(srv)
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	switch role {
	case roleAgentq:
		w, err := worker.New(agentqConfig(srv, c), rdb, worker.WithLogger(discardLogger()),
			worker.WithAgent(noopAgent, agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
				return nil, nil
			})))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := w.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case roleAsynq:
		s := asynq.NewServerFromRedisClient(rdb, asynqConfig(c, true))
		if err := s.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-ctx.Done()
		s.Shutdown()
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
		return 2
	}
	return 0
}

// child is a running child process; stop ends it.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *lockedBuffer
}

// lockedBuffer collects a child's output for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 64<<10 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// startChild starts cmd with a stdin pipe whose closing tells it to stop.
func startChild(cmd *exec.Cmd) (*child, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: in, out: out}, nil
}

// stop closes the child's stdin and, for a command that stops on SIGTERM
// instead, signals it; it kills it after 20s.
func (c *child) stop(term bool) error {
	_ = c.stdin.Close()
	if term {
		_ = c.cmd.Process.Signal(os.Interrupt)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("child %d: %w; output:\n%s", c.cmd.Process.Pid, err, c.out.String())
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("child %d did not stop within 20s; killed", c.cmd.Process.Pid)
	}
}

// stopAll stops every child and returns the first error.
func stopAll(cs []*child, term bool) error {
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() { errs <- c.stop(term) }()
	}
	var first error
	for range cs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitServers waits until n distinct processes have announced an asynq
// server (asynq's heartbeat, written as a server starts): the agentq
// worker is an asynq server too.
func waitServers(ctx context.Context, rdb redis.UniversalClient, n int, cs []*child) error {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := insp.Servers()
		if err != nil {
			return err
		}
		pids := map[int]bool{}
		for _, s := range ss {
			pids[s.PID] = true
		}
		if len(pids) >= n {
			return nil
		}
		for _, c := range cs {
			if c.cmd.ProcessState != nil {
				return fmt.Errorf("child %d exited: %s", c.cmd.Process.Pid, c.out.String())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d processes started within 30s", len(pids), n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// runProcs is one round of the multi-process throughput benchmark: n
// tasks are prefilled into the paused default queue, procs children of
// the role start, and once all of them have announced themselves the queue
// is resumed and the clock runs until asynq's processed counter reaches n.
// It returns total tasks/s.
func runProcs(ctx context.Context, srv *redistest.Server, role string, c, n int) (float64, error) {
	rdb := newClient(srv)
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := prefill(ctx, rdb, n); err != nil {
		return 0, err
	}
	if err := pauseQueue(rdb); err != nil {
		return 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	var cs []*child
	for range procs {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), roleEnv+"="+role, redisEnv+"="+srv.Addr, concEnv+"="+strconv.Itoa(c))
		ch, err := startChild(cmd)
		if err != nil {
			_ = stopAll(cs, false)
			return 0, err
		}
		cs = append(cs, ch)
	}
	var rate float64
	err = func() error {
		if err := waitServers(ctx, rdb, procs, cs); err != nil {
			return err
		}
		cpu0, err := redisCPU(ctx, rdb)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := insp.UnpauseQueue(tasks.DefaultQueue); err != nil {
			return err
		}
		end, err := waitProcessed(ctx, rdb, int64(n), 2*time.Minute)
		if err != nil {
			return err
		}
		cpu1, err := redisCPU(ctx, rdb)
		if err != nil {
			return err
		}
		rate = float64(n) / end.Sub(start).Seconds()
		redisUS = (cpu1 - cpu0) / float64(n) * 1e6
		return checkNoFailures(ctx, rdb)
	}()
	if serr := stopAll(cs, false); err == nil {
		err = serr
	}
	return rate, err
}

// BenchmarkThroughputProcs is BenchmarkThroughput across processes: 4
// agentq worker processes against 4 plain asynq server processes (this
// test binary re-executed), on one redis-server, interleaved A/B; total
// tasks/s from resuming the paused, prefilled queue to the n-th completion.
func BenchmarkThroughputProcs(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	n := 2 * envInt("AGENTQ_BENCH_TASKS", 5000)
	rounds := envInt("AGENTQ_BENCH_PROC_ROUNDS", 5)
	c := envInt("AGENTQ_BENCH_PROC_CONCURRENCY", config.DefaultConcurrency)
	aq := side{"asynq", func(ctx context.Context) (float64, error) { return runProcs(ctx, srv, roleAsynq, c, n) }}
	ag := side{"agentq", func(ctx context.Context) (float64, error) { return runProcs(ctx, srv, roleAgentq, c, n) }}
	warm := []side{
		{"warm-asynq", func(ctx context.Context) (float64, error) { return runProcs(ctx, srv, roleAsynq, c, n/10) }},
		{"warm-agentq", func(ctx context.Context) (float64, error) { return runProcs(ctx, srv, roleAgentq, c, n/10) }},
	}
	res := interleave(b, srv, rounds, warm, []side{aq, ag})
	ma, mg := median(res["asynq"]), median(res["agentq"])
	report("%d processes × c=%d: asynq %.0f tasks/s  agentq %.0f tasks/s  ratio %.2f", procs, c, ma, mg, mg/ma)
	detail("rounds (n=%d) asynq: %s | agentq: %s", n, fmtRates(res["asynq"]), fmtRates(res["agentq"]))
	ra, rg := median(res["asynq"+redisSuffix]), median(res["agentq"+redisSuffix])
	report("%d processes × c=%d Redis CPU per task: asynq %.1fµs  agentq %.1fµs (ratio %.2f)", procs, c, ra, rg, rg/ra)
	headline(hlProcs, "%.2f", mg/ma)
}

// goBuild builds a main package of this module into dir and returns the
// binary's path.
func goBuild(tb testing.TB, dir, pkg string) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("the go command is needed to build %s: %v", pkg, err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command(gobin, "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// BenchmarkBreakerLeakage runs 4 real worker processes (cmd/worker, built
// for the run) against a dead HTTP backend on loopback that answers every
// call 503 (provider_error: retried, counted by the breaker), with
// failure_threshold 3, cooldown 1s and half_open_max_calls 1, for a few
// cooldowns. It counts the calls that reach the backend and compares them
// with what one breaker per process would let through: 4 × threshold to
// open, then 4 × half_open_max_calls per cooldown.
func BenchmarkBreakerLeakage(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	ctx := context.Background()
	dir := b.TempDir()
	bin := goBuild(b, dir, "github.com/agentq/agentq/cmd/worker")

	const threshold, halfOpen, cooldown, c = 3, 1, time.Second, 10
	window := envDuration("AGENTQ_BENCH_LEAK_WINDOW", 4500*time.Millisecond)

	var mu sync.Mutex
	var calls []time.Time
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"backend unavailable"}}`)
	}))
	defer backend.Close()

	cfgPath := filepath.Join(dir, "worker.yaml")
	yaml := fmt.Sprintf(`redis:
  url: %s
worker:
  concurrency: %d
  shutdown_timeout: 5s
agents:
  dead:
    http: {url: %s/v1/run}
    timeout: 2s
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 200ms, jitter: 0.2}
    circuit_breaker: {failure_threshold: %d, cooldown: %s, half_open_max_calls: %d}
`, srv.URL(), c, backend.URL, threshold, cooldown, halfOpen)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}

	rdb := newClient(srv)
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := prefill(ctx, rdb, 400, "dead"); err != nil {
		b.Fatal(err)
	}
	if err := insp.PauseQueue(tasks.DefaultQueue); err != nil {
		b.Fatal(err)
	}
	var cs []*child
	for range procs {
		ch, err := startChild(exec.Command(bin, "--config", cfgPath, "--log-level", "error"))
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, ch)
	}
	err := waitServers(ctx, rdb, procs, cs)
	var start time.Time
	if err == nil {
		start = time.Now()
		err = insp.UnpauseQueue(tasks.DefaultQueue)
	}
	if err == nil {
		time.Sleep(window)
	}
	end := time.Now()
	if serr := stopAll(cs, true); err == nil {
		err = serr
	}
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	got := append([]time.Time(nil), calls...)
	mu.Unlock()
	var in []time.Time
	for _, t := range got {
		if !t.Before(start) && !t.After(end) {
			in = append(in, t)
		}
	}
	// The opening burst is the calls before the first quiet gap of half a
	// cooldown (the breaker opened); the rest arrive after it.
	burst := len(in)
	for i := 1; i < len(in); i++ {
		if in[i].Sub(in[i-1]) >= cooldown/2 {
			burst = i
			break
		}
	}
	cooldowns := int(window / cooldown)
	perProc := procs*threshold + procs*halfOpen*cooldowns
	shared := threshold + halfOpen*cooldowns
	report("breaker leakage (%d worker processes × c=%d, dead backend 503, threshold %d, cooldown %s, %s ≈ %d cooldowns): %d calls reached the backend (opening burst %d, later %d); per-process breakers would allow %d, one shared breaker ideally %d",
		procs, c, threshold, cooldown, window, cooldowns, len(in), burst, len(in)-burst, perProc, shared)
	detail("call offsets (ms): %s", offsets(start, in))
}

// offsets renders call times as milliseconds after start.
func offsets(start time.Time, ts []time.Time) string {
	var w strings.Builder
	for i, t := range ts {
		if i > 0 {
			w.WriteByte(' ')
		}
		w.WriteString(strconv.FormatInt(t.Sub(start).Milliseconds(), 10))
	}
	return w.String()
}

// envDuration reads a positive duration knob from the environment.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
