package breaker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// These tests prove invariants 1, 3, 4 and 5 of DESIGN.md §2 under
// concurrency, against a real redis-server: many goroutines in several
// Breakers (each with its own connection pool) and then several OS
// processes hammer one breaker that keeps cycling through half-open
// episodes. The evidence is (a) the admissions each worker saw, grouped by
// generation, and (b) the transitions the scripts published, which must form
// a valid state machine with generations increasing by exactly one.

// A hammer run lasts until wantEpisodes half-open generations had trials, or
// maxHammer (a loaded CI machine under -race is slow; the check then fails).
// The run proves invariants, not latency: its Breakers and clients wait
// hammerCallTimeout for Redis, so a starved machine slows the run down
// instead of failing calls as unavailable (the breaker's 2s default).
const (
	wantEpisodes      = 25
	maxHammer         = 60 * time.Second
	hammerCallTimeout = 30 * time.Second
)

// hammerCfg cycles quickly: one failure opens, 5ms of cooldown (growing
// to at most 20ms), then trials.
func hammerCfg(maxCalls int) Config {
	return Config{FailureThreshold: 1, Cooldown: 5 * time.Millisecond, MaxCooldown: 20 * time.Millisecond, HalfOpenMaxCalls: maxCalls, TrialLease: 2 * time.Second}
}

// rateHammerCfg is hammerCfg in rate mode: 5 counted calls in a 2s window,
// half of them failed, from 2 distinct tasks, open it.
func rateHammerCfg(maxCalls int) Config {
	c := hammerCfg(maxCalls)
	c.Mode, c.FailureThreshold = ModeRate, 0
	c.Window, c.FailureRate, c.MinCalls, c.MinFailingTasks = 2*time.Second, 0.5, 5, 2
	return c
}

// trialLine is one admitted trial, as a hammer worker reports it.
type trialLine struct {
	PID        int    `json:"pid"`
	Generation int64  `json:"generation"`
	Token      string `json:"token"`
	Error      string `json:"error,omitempty"`
}

// hammer runs workers goroutines of Allow/Record against key until ctx is
// done, reporting every half-open admission to report. Outcomes are random:
// trials succeed, fail or are canceled; closed-state calls mostly fail so the
// breaker keeps reopening. Fenced Records are expected and ignored.
func hammer(ctx context.Context, b *Breakers, key string, cfg Config, workers int, report func(trialLine)) {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				adm, err := b.Allow(context.Background(), key, cfg)
				if err != nil {
					report(trialLine{Error: "allow: " + err.Error()})
					return
				}
				if !adm.Allowed {
					time.Sleep(time.Millisecond)
					continue
				}
				var out Outcome
				if adm.State == StateHalfOpen {
					report(trialLine{PID: os.Getpid(), Generation: adm.Generation, Token: adm.Token})
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // the "agent call"
					switch r := rand.IntN(10); {
					case r < 5:
						out = OutcomeSuccess
					case r < 9:
						out = OutcomeFailure
					default:
						out = OutcomeIgnore
					}
				} else {
					out = OutcomeFailure
					if rand.IntN(4) == 0 {
						out = OutcomeSuccess
					}
				}
				task := ForTask(fmt.Sprint("task-", rand.IntN(5))) // rate mode counts distinct failing tasks
				if _, err := b.Record(context.Background(), key, cfg, adm, out, task); err != nil && !errors.Is(err, ErrStaleAdmission) {
					report(trialLine{Error: "record: " + err.Error()})
					return
				}
			}
		}()
	}
	wg.Wait()
}

// breakerEvent is a published transition.
type breakerEvent struct {
	Key        string `json:"key"`
	State      State  `json:"state"`
	Generation int64  `json:"generation"`
	Kind       string `json:"kind,omitempty"` // "count", "hot": no transition (not collected)
}

// markerScript publishes ARGV[2] on channel ARGV[1] from the node of
// KEYS[1] (the breaker's key, which it does not touch).
var markerScript = redis.NewScript(`redis.call('PUBLISH', ARGV[1], ARGV[2]) return 1`)

// collectEvents subscribes to the transition channel; stop returns every
// event of key received so far, once the channel has drained.
func collectEvents(t *testing.T, rdb redis.UniversalClient, key string) (stop func() []breakerEvent) {
	t.Helper()
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, rkeys.BreakerChannel())
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		events []breakerEvent
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for msg := range sub.Channel() {
			var e breakerEvent
			if json.Unmarshal([]byte(msg.Payload), &e) == nil && e.Key == key && e.Kind == "" {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}
	}()
	return func() []breakerEvent {
		// A marker published after all work arrives after all its events:
		// published from the breaker's own node (a script on its key), as on
		// a Cluster messages from different nodes are not ordered.
		require.NoError(t, markerScript.Run(ctx, rdb, []string{rkeys.Breaker(key)},
			rkeys.BreakerChannel(), `{"key":"`+key+`","state":"marker"}`).Err())
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(events)
			last := breakerEvent{}
			if n > 0 {
				last = events[n-1]
			}
			mu.Unlock()
			if last.State == "marker" {
				break
			}
			require.True(t, time.Now().Before(deadline), "event marker never arrived")
			time.Sleep(5 * time.Millisecond)
		}
		_ = sub.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return events[:len(events)-1]
	}
}

// checkRun asserts the invariants on one run's admissions and transitions.
// events are every transition of a breaker that was new (CLOSED, generation
// 0) when collectEvents subscribed: the first is the run's trip to OPEN.
func checkRun(t *testing.T, trials []trialLine, events []breakerEvent, maxCalls int) {
	t.Helper()
	perGen := map[int64]int{}
	tokens := map[string]bool{}
	for _, tr := range trials {
		require.Empty(t, tr.Error)
		perGen[tr.Generation]++
		require.False(t, tokens[tr.Token], "token %s admitted twice", tr.Token)
		tokens[tr.Token] = true
	}
	for gen, n := range perGen {
		require.LessOrEqual(t, n, maxCalls, "generation %d admitted %d trials (max %d)", gen, n, maxCalls)
	}
	t.Logf("%d trials in %d half-open generations, %d transitions", len(trials), len(perGen), len(events))
	require.GreaterOrEqual(t, len(perGen), wantEpisodes, "too few half-open episodes to prove anything")

	// Transitions: one step each, generation +1 each, valid edges only, and
	// every trial was admitted in a half-open generation.
	valid := map[[2]State]bool{
		{StateClosed, StateOpen}: true, {StateOpen, StateHalfOpen}: true, {StateHalfOpen, StateHalfOpen}: true,
		{StateHalfOpen, StateClosed}: true, {StateHalfOpen, StateOpen}: true,
	}
	state := map[int64]State{}
	require.NotEmpty(t, events)
	require.Equal(t, breakerEvent{Key: events[0].Key, State: StateOpen, Generation: 1}, events[0], "the first transition is the trip")
	prev, gen := StateClosed, int64(0)
	for i, e := range events {
		require.Equal(t, gen+1, e.Generation, "generations must increase by exactly one per transition (event %d of %d)", i, len(events))
		require.True(t, valid[[2]State{prev, e.State}], "invalid transition %s -> %s at generation %d", prev, e.State, e.Generation)
		prev, gen = e.State, e.Generation
		state[gen] = e.State
	}
	for g := range perGen {
		require.Equal(t, StateHalfOpen, state[g], "trial admitted in generation %d, which was not half-open", g)
	}
	// Every episode that closed or reopened did so from one of its own trials.
	for _, e := range events {
		if e.State == StateClosed || e.State == StateOpen {
			if state[e.Generation-1] == StateHalfOpen {
				require.Positive(t, perGen[e.Generation-1], "generation %d ended without an admitted trial", e.Generation-1)
			}
		}
	}
}

// TestBreakerHalfOpenConcurrency: 4 Breakers × 50 goroutines in one process.
func TestBreakerHalfOpenConcurrency(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers a breaker for seconds; skipped with -short (make unit)")
	}
	t.Parallel()
	for _, mode := range []func(int) Config{hammerCfg, rateHammerCfg} {
		for _, maxCalls := range []int{1, 3} {
			cfg := mode(maxCalls)
			t.Run(fmt.Sprintf("%s/max_calls=%d", cfg.Resolved(), maxCalls), func(t *testing.T) {
				t.Parallel()
				srv := redistest.Start(t)
				hammerRun(t, srv.Client(), func() redis.UniversalClient {
					c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 50, ReadTimeout: hammerCallTimeout})
					t.Cleanup(func() { _ = c.Close() })
					return c
				}, cfg, 4, 50)
			})
		}
	}
}

// hammerRun trips a breaker through admin, then hammers it from clients
// Breakers (each on its own client from newClient) × goroutines until
// wantEpisodes half-open episodes had trials, and checks the invariants
// (checkRun).
func hammerRun(t *testing.T, admin redis.UniversalClient, newClient func() redis.UniversalClient, cfg Config, clients, goroutines int) {
	t.Helper()
	key := "contended-" + string(cfg.Resolved())
	maxCalls := cfg.HalfOpenMaxCalls
	// Subscribe before the trip, whose event is then the first one seen: on
	// a Cluster the subscription may sit on another node than the breaker,
	// which forwards the trip's PUBLISH over the cluster bus whenever it
	// gets to it, so an event published before SUBSCRIBE returned can
	// still arrive after it.
	stop := collectEvents(t, admin, key)
	// The trip is the setup, not the load under test: a generous bound, so
	// that a loaded machine does not fail it at the breaker's call timeout.
	require.NoError(t, New(admin, WithCallTimeout(30*time.Second)).Trip(context.Background(), key, time.Millisecond))
	var (
		mu     sync.Mutex
		trials []trialLine
		gens   = map[int64]bool{}
	)
	ctx, cancel := context.WithTimeout(context.Background(), maxHammer)
	defer cancel()
	report := func(l trialLine) {
		mu.Lock()
		defer mu.Unlock()
		trials = append(trials, l)
		if gens[l.Generation] = true; len(gens) >= wantEpisodes {
			cancel()
		}
	}
	var wg sync.WaitGroup
	for range clients {
		b := New(newClient(), WithCallTimeout(hammerCallTimeout))
		wg.Add(1)
		go func() { defer wg.Done(); hammer(ctx, b, key, cfg, goroutines, report) }()
	}
	wg.Wait()
	checkRun(t, trials, stop(), maxCalls)
}

// Environment of the helper process.
const (
	helperEnv      = "AGENTQ_BREAKER_HELPER" // mode: hammer | hold
	helperAddrEnv  = "AGENTQ_BREAKER_ADDR"
	helperKeyEnv   = "AGENTQ_BREAKER_KEY"
	helperMaxEnv   = "AGENTQ_BREAKER_MAX"
	helperLeaseEnv = "AGENTQ_BREAKER_LEASE_MS"
	helperModeEnv  = "AGENTQ_BREAKER_MODE" // "rate": rateHammerCfg
)

// TestHelperProcess is not a test: it is the child process of the
// multi-process tests (the test binary re-executed). It prints one JSON line
// per half-open admission on stdout.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(helperAddrEnv), PoolSize: 30, ReadTimeout: hammerCallTimeout})
	b := New(rdb, WithCallTimeout(hammerCallTimeout))
	key := os.Getenv(helperKeyEnv)
	cfg := hammerCfg(atoi(helperMaxEnv))
	if os.Getenv(helperModeEnv) == string(ModeRate) {
		cfg = rateHammerCfg(atoi(helperMaxEnv))
	}
	if ms := atoi(helperLeaseEnv); ms > 0 {
		cfg.TrialLease = time.Duration(ms) * time.Millisecond
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(v any) { mu.Lock(); _ = enc.Encode(v); mu.Unlock() }
	switch mode {
	case "hammer":
		// Run until the parent closes our stdin (or the safety timeout).
		ctx, cancel := context.WithTimeout(context.Background(), maxHammer+5*time.Second)
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
		hammer(ctx, b, key, cfg, 20, func(l trialLine) { emit(l) })
		cancel()
	case "hold":
		// Take a trial and hold it until SIGKILLed.
		for {
			adm, err := b.Allow(context.Background(), key, cfg)
			if err != nil {
				emit(trialLine{Error: err.Error()})
				os.Exit(1)
			}
			if adm.Allowed && adm.State == StateHalfOpen {
				emit(adm)
				select {}
			}
			time.Sleep(time.Millisecond)
		}
	}
	_ = rdb.Close()
	os.Exit(0)
}

// helperProc is a running helper process.
type helperProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // closing it stops a hammer
	lines  *bufio.Scanner
	stderr *lockedBuffer
}

// helper starts the test binary as a helper process in mode.
func helper(t *testing.T, mode string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	p := &helperProc{cmd: cmd, stdin: stdin, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	p.lines = bufio.NewScanner(stdout)
	p.lines.Buffer(make([]byte, 1<<20), 1<<20)
	return p
}

// lockedBuffer is a goroutine-safe stderr sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBreakerMultiProcess: 4 OS processes × 20 goroutines, each with its own
// connections, hammer one breaker; at most HalfOpenMaxCalls trials per
// half-open generation across all of them.
func TestBreakerMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several processes for seconds; skipped with -short (make unit)")
	}
	t.Parallel()
	for _, mode := range []Mode{ModeConsecutive, ModeRate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			multiProcess(t, mode)
		})
	}
}

func multiProcess(t *testing.T, mode Mode) {
	srv := redistest.Start(t)
	admin := srv.Client()
	const key, maxCalls = "multiproc", 2
	stop := collectEvents(t, admin, key) // before the trip: see hammerRun
	// The trip is the setup, not the load under test: a generous bound, so
	// that a loaded machine does not fail it at the breaker's call timeout.
	require.NoError(t, New(admin, WithCallTimeout(30*time.Second)).Trip(context.Background(), key, time.Millisecond))

	var (
		mu      sync.Mutex
		trials  []trialLine
		gens    = map[int64]bool{}
		pids    = map[int]bool{}
		readers sync.WaitGroup
		procs   []*helperProc
	)
	for i := 0; i < 4; i++ {
		p := helper(t, "hammer",
			helperAddrEnv+"="+srv.Addr, helperKeyEnv+"="+key, helperMaxEnv+"="+strconv.Itoa(maxCalls), helperModeEnv+"="+string(mode))
		procs = append(procs, p)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for p.lines.Scan() {
				var l trialLine
				if json.Unmarshal(p.lines.Bytes(), &l) != nil {
					continue // test framework chatter
				}
				mu.Lock()
				trials = append(trials, l)
				gens[l.Generation] = true
				pids[l.PID] = true
				mu.Unlock()
			}
		}()
	}
	// Let them hammer until enough episodes involved every process.
	deadline := time.Now().Add(maxHammer)
	for time.Now().Before(deadline) {
		mu.Lock()
		enough := len(gens) >= wantEpisodes && len(pids) == 4
		mu.Unlock()
		if enough {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range procs {
		require.NoError(t, p.stdin.Close())
	}
	readers.Wait()
	for _, p := range procs {
		require.NoError(t, p.cmd.Wait(), "child failed: %s", p.stderr.String())
	}
	require.Len(t, pids, 4, "every process took part in the trials")
	checkRun(t, trials, stop(), maxCalls)
}

// TestBreakerKilledTrialHolder: a process holding the only trial is
// SIGKILLed. The breaker admits a new trial once the lease expires (not
// before), and the dead process's admission — older generation, lost lease —
// can neither close nor reopen the breaker.
func TestBreakerKilledTrialHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a process, waits out a lease; skipped with -short (make unit)")
	}
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	b := New(rdb)
	const key = "killed"
	const lease = time.Second
	cfg := hammerCfg(1)
	cfg.TrialLease = lease
	require.NoError(t, b.Trip(ctx, key, time.Millisecond))

	p := helper(t, "hold",
		helperAddrEnv+"="+srv.Addr, helperKeyEnv+"="+key, helperMaxEnv+"=1", helperLeaseEnv+"=1000")
	var held Admission
	for held.Token == "" {
		require.True(t, p.lines.Scan(), "helper ended without a trial: %s", p.stderr.String())
		_ = json.Unmarshal(p.lines.Bytes(), &held)
	}
	require.True(t, held.Allowed)
	require.Equal(t, StateHalfOpen, held.State)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL)) // no Record, no release
	_ = p.cmd.Wait()

	deny, err := b.Allow(ctx, key, cfg)
	require.NoError(t, err)
	require.False(t, deny.Allowed, "the dead process still holds the lease")
	require.Equal(t, held.Generation, deny.Generation)
	leaseEnd := deny.RetryAt

	start := time.Now()
	trial := pollAllow(t, b, key, cfg, 3*lease)
	require.Less(t, time.Since(start), lease+500*time.Millisecond, "recovered within the lease time")
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.False(t, now.Before(leaseEnd), "new trial admitted before the old lease expired")
	require.Equal(t, StateHalfOpen, trial.State)
	require.Equal(t, held.Generation+1, trial.Generation, "expiry starts a new episode")

	// The dead worker's result arrives late (e.g. replayed): it changes nothing.
	before, err := b.Get(ctx, key)
	require.NoError(t, err)
	for _, out := range []Outcome{OutcomeSuccess, OutcomeFailure, OutcomeIgnore} {
		st, err := b.Record(ctx, key, cfg, held, out)
		requireStale(t, err, false)
		require.Equal(t, StateHalfOpen, st)
	}
	after, err := b.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, before.State, after.State)
	require.Equal(t, before.Generation, after.Generation)
	require.Equal(t, before.ConsecutiveFailures, after.ConsecutiveFailures)
	require.Equal(t, 1, after.TrialsInFlight, "the live trial keeps its lease")

	st, err := b.Record(ctx, key, cfg, trial, OutcomeSuccess)
	require.NoError(t, err)
	require.Equal(t, StateClosed, st)
}
