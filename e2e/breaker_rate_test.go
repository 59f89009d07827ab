package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// The rate-mode breaker against real worker processes (issue 24): a
// flaky backend does not open it, one poison task does not defer anyone
// else, and a real outage opens it fleet-wide after the configured volume.

// rateBackend is a loopback OpenAI-like backend: tasks named bad-* get a
// 400 (the caller's error), the poison task always a 500, and the others
// a 500 for a fraction of calls drawn in shuffled blocks of 20 (7 of 20:
// 35%, random order, never a long lucky or unlucky streak), after latency.
type rateBackend struct {
	srv     *httptest.Server
	poison  string
	latency time.Duration
	mu      sync.Mutex
	block   []bool // the current block's remaining draws (true: fail)
	fails   int    // failures per block of 20
	calls   atomic.Int64
	failed  atomic.Int64
}

func newRateBackend(t *testing.T, failsPer20 int, poison string, latency time.Duration) *rateBackend {
	t.Helper()
	b := &rateBackend{poison: poison, latency: latency, fails: failsPer20}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID string `json:"task_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		b.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(req.TaskID, "bad-"):
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"Invalid value for 'messages': empty array","type":"invalid_request_error","code":null}}`)
			return
		case req.TaskID == b.poison || b.draw():
			b.failed.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)
			return
		}
		time.Sleep(b.latency)
		fmt.Fprintf(w, `{"ok":true,"task":%q}`, req.TaskID)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// draw says whether this call fails.
func (b *rateBackend) draw() bool {
	if b.fails == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.block) == 0 {
		b.block = make([]bool, 20)
		for i := range b.fails {
			b.block[i] = true
		}
		rand.Shuffle(len(b.block), func(i, j int) { b.block[i], b.block[j] = b.block[j], b.block[i] })
	}
	f := b.block[0]
	b.block = b.block[1:]
	return f
}

// fleetResult is one run of tasks through three worker processes.
type fleetResult struct {
	views   map[string]*tasks.View
	elapsed time.Duration // from the enqueue to the last terminal state
	opens   int           // breaker "open" events seen
	snap    breaker.Snapshot
}

// runFleet starts a Redis and three worker processes on cfg (whose agent
// llm has breaker key key), enqueues ids for agent llm, and waits until
// every task is terminal.
func runFleet(t *testing.T, b bins, cfg, key string, ids []string, within time.Duration) fleetResult {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	events := watchBreaker(t, rdb, key)
	workers := make([]*proc, 3)
	for i := range workers {
		ops := freeAddr(t)
		workers[i] = start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
		waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	}
	var lines []string
	for _, id := range ids {
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","action":"chat","params":{}}`, id))
	}
	began := time.Now()
	_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	views := waitStates(t, rdb, ids, within)
	res := fleetResult{views: views, elapsed: time.Since(began)}
	for _, ev := range events() {
		if ev.State == string(breaker.StateOpen) {
			res.opens++
		}
	}
	snap, err := breaker.New(rdb).Get(t.Context(), key)
	require.NoError(t, err)
	res.snap = snap
	for _, w := range workers {
		require.Equal(t, 0, w.stop(t, 15*time.Second))
	}
	return res
}

// deferredTasks lists the tasks whose history has a deferral.
func deferredTasks(views map[string]*tasks.View) []string {
	var out []string
	for id, v := range views {
		for _, ev := range v.History {
			if ev.Event == tasks.EventDeferred {
				out = append(out, id)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// flakyConfig is the configuration of the flaky and poison runs: the
// breaker block given, fast retries and restarts.
func flakyConfig(t *testing.T, url, key, breaker string) string {
	return writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 10, shutdown_timeout: 5s}
defaults:
  timeout: 5s
  retry: {max_attempts: 6, initial_backoff: 20ms, max_backoff: 100ms}
  restart: {max_restarts: 3, delays: [200ms]}
agents:
  llm:
    http: {url: %q}
    breaker_key: %s
    circuit_breaker: %s
`, url, key, breaker))
}

// TestRateBreakerIgnoresFlakyBackend (issue 24 (a)): a backend failing 35%
// of calls at random, 300 tasks (15 of them the caller's 400s) through 3
// workers: with the default rate-mode breaker it never opens, no task is
// deferred, every healthy task succeeds and every bad one is dead-lettered
// at its first attempt as invalid_request. The same run with the breaker
// out of the way (consecutive mode, an unreachable threshold) is timed
// too; the ratio is logged (no deferral is what keeps it near 1).
func TestRateBreakerIgnoresFlakyBackend(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	var ids []string
	for i := range 300 {
		if i%20 == 7 {
			ids = append(ids, fmt.Sprintf("bad-%03d", i))
		} else {
			ids = append(ids, fmt.Sprintf("ok-%03d", i))
		}
	}
	const key = "llm.flaky"
	check := func(name string, r fleetResult) {
		t.Helper()
		require.Zero(t, r.opens, "%s: the breaker opened", name)
		require.Empty(t, deferredTasks(r.views), "%s: tasks were deferred", name)
		require.Equal(t, breaker.StateClosed, r.snap.State, name)
		for id, v := range r.views {
			if strings.HasPrefix(id, "bad-") {
				require.Equal(t, tasks.StateDeadLettered, v.State, "%s: %s", name, id)
				require.Equal(t, 1, v.Attempts, "%s: %s: a caller's error is not retried", name, id)
				continue
			}
			require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s: %+v", name, id, v.History)
		}
	}
	be := newRateBackend(t, 7, "", 100*time.Millisecond)
	rate := runFleet(t, b, flakyConfig(t, be.srv.URL+"/v1/chat", key, "{}"), key, ids, 50*time.Second)
	check("rate mode", rate)
	require.Positive(t, rate.snap.FailureCount, "the backend's failures were counted")
	t.Logf("rate mode: %d calls, %d failed (%.0f%%); breaker counted %d failures, %d successes",
		be.calls.Load(), be.failed.Load(), 100*float64(be.failed.Load())/float64(be.calls.Load()), rate.snap.FailureCount, rate.snap.SuccessCount)

	be2 := newRateBackend(t, 7, "", 100*time.Millisecond)
	off := runFleet(t, b, flakyConfig(t, be2.srv.URL+"/v1/chat", key, "{mode: consecutive, failure_threshold: 1000000}"), key, ids, 50*time.Second)
	check("breaker out of the way", off)
	t.Logf("300 tasks: rate-mode breaker %s, breaker out of the way %s (ratio %.2f)",
		rate.elapsed.Round(time.Millisecond), off.elapsed.Round(time.Millisecond), float64(rate.elapsed)/float64(off.elapsed))
}

// taskLatency is the time from a task's first history event to its last.
func taskLatency(v *tasks.View) time.Duration {
	if len(v.History) == 0 {
		return 0
	}
	return v.History[len(v.History)-1].At.Sub(v.History[0].At)
}

func p95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)*95-1)/100]
}

// TestRateBreakerPoisonTaskDefersNoOne (issue 24 (b)): one task the backend
// always fails among 200 it never fails: the poison task goes its own way
// (retries, restarts, dead letter) and no healthy task is deferred; the
// healthy tasks' p95 latency is logged against a run without the poison.
func TestRateBreakerPoisonTaskDefersNoOne(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	const key = "llm.poison"
	var healthy []string
	for i := range 200 {
		healthy = append(healthy, fmt.Sprintf("ok-%03d", i))
	}
	latencies := func(r fleetResult) []time.Duration {
		var ds []time.Duration
		for _, id := range healthy {
			ds = append(ds, taskLatency(r.views[id]))
		}
		return ds
	}
	be := newRateBackend(t, 0, "poison", 10*time.Millisecond)
	// The poison task is enqueued first, so its failures come while the
	// healthy tasks run.
	with := runFleet(t, b, flakyConfig(t, be.srv.URL+"/v1/chat", key, "{}"), key, append([]string{"poison"}, healthy...), 50*time.Second)
	require.Zero(t, with.opens, "one task's failures opened the breaker")
	require.Empty(t, deferredTasks(with.views), "tasks were deferred")
	for _, id := range healthy {
		require.Equal(t, tasks.StateSucceeded, with.views[id].State, id)
	}
	pv := with.views["poison"]
	require.Equal(t, tasks.StateDeadLettered, pv.State)
	require.Equal(t, 3, pv.Restarts, "the poison task used its restarts")
	t.Logf("poison task: %d calls to the backend failed, %d restarts; breaker counted %d failures", be.failed.Load(), pv.Restarts, with.snap.FailureCount)

	be2 := newRateBackend(t, 0, "", 10*time.Millisecond)
	without := runFleet(t, b, flakyConfig(t, be2.srv.URL+"/v1/chat", key, "{}"), key, healthy, 50*time.Second)
	require.Empty(t, deferredTasks(without.views))
	pw, pn := p95(latencies(with)), p95(latencies(without))
	t.Logf("healthy tasks' p95 latency: %s with the poison task, %s without (ratio %.2f)", pw.Round(time.Millisecond), pn.Round(time.Millisecond), float64(pw)/float64(max(pn, time.Millisecond)))
}

// refusingBackend accepts TCP connections and resets them at once (every
// call fails as a network error), counting each with its arrival time.
type refusingBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	calls []time.Time
}

func newRefusingBackend(t *testing.T) *refusingBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &refusingBackend{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.calls = append(r.calls, time.Now())
			r.mu.Unlock()
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST: the call fails at once
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return r
}

func (r *refusingBackend) snapshot() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.calls...)
}

// TestRateBreakerOpensOnOutage (issue 24 (c)): every call fails at the
// network. The rate-mode breaker opens fleet-wide after min_calls counted
// calls (plus at most the calls already in flight: 3 workers ×
// concurrency 2), no call reaches the backend while it is open, a
// half-open episode admits one trial, and the failed trial reopens it for
// twice the cooldown. Every worker defers tasks while it is open.
func TestRateBreakerOpensOnOutage(t *testing.T) {
	t.Parallel()
	const (
		key         = "llm.down"
		minCalls    = 30
		cooldown    = 2 * time.Second
		concurrency = 2
		// inflightSlack: calls admitted before the opening (or by a
		// worker whose local view has not yet heard of it: the event's
		// pubsub latency) may arrive just after it on a loaded machine.
		inflightSlack = 250 * time.Millisecond
	)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newRefusingBackend(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: %d, shutdown_timeout: 5s}
defaults:
  timeout: 5s
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 50ms}
  restart: {max_restarts: 20, delays: [300ms]}
agents:
  llm:
    http: {url: "http://%s/v1/chat"}
    breaker_key: %s
    circuit_breaker: {window: 10s, min_calls: %d, min_failing_tasks: 3, cooldown: %s}
`, concurrency, be.ln.Addr(), key, minCalls, cooldown))
	events := watchBreaker(t, rdb, key)
	var workerIDs []string
	for i := range 3 {
		ops := freeAddr(t)
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
		waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
		workerIDs = append(workerIDs, ops)
	}
	var lines, ids []string
	for i := range 40 {
		id := fmt.Sprintf("down-%02d", i)
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","params":{}}`, id))
	}
	_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)

	opens := func() []breakerEvent {
		var o []breakerEvent
		for _, ev := range events() {
			if ev.State == string(breaker.StateOpen) {
				o = append(o, ev)
			}
		}
		return o
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(opens()) < 2 {
		require.True(t, time.Now().Before(deadline), "breaker did not open and reopen within 30s; events: %+v; %d calls", events(), len(be.snapshot()))
		time.Sleep(20 * time.Millisecond)
	}
	grown, err := rdb.HGet(t.Context(), rkeys.Breaker(key), "cooldown").Int64()
	require.NoError(t, err)
	o := opens()
	calls := be.snapshot()
	for i, ev := range o[:2] {
		require.False(t, ev.openUntil.IsZero(), "open event %d: open_until not read", i)
	}
	first := o[0].openUntil.Add(-cooldown)
	before := 0
	for _, c := range calls {
		if c.Before(first.Add(time.Millisecond)) { // Redis TIME is floored to the millisecond
			before++
		}
	}
	t.Logf("outage: %d calls reached the backend before the breaker opened (min_calls %d, %d in flight at most)", before, minCalls, 3*concurrency)
	require.GreaterOrEqual(t, before, minCalls, "it opened before min_calls counted calls")
	require.LessOrEqual(t, before, minCalls+3*concurrency, "more calls than min_calls plus those in flight before it opened")
	for _, c := range calls {
		require.False(t, !c.Before(first.Add(inflightSlack)) && c.Before(o[0].openUntil),
			"a call reached the backend at %s while the breaker was open (%s → %s)", c.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano), o[0].openUntil.Format(time.RFC3339Nano))
	}
	// The half-open episode between the two openings: one trial, which
	// failed and reopened it for twice the cooldown.
	second := o[1].openUntil.Add(-time.Duration(grown) * time.Millisecond)
	trials := 0
	for _, c := range calls {
		if !c.Before(o[0].openUntil) && c.Before(second.Add(time.Millisecond)) { // Redis TIME is floored to the millisecond
			trials++
		}
	}
	require.Equal(t, 1, trials, "calls in the half-open episode; events %+v", events())
	require.Equal(t, (2 * cooldown).Milliseconds(), grown, "a failed trial doubles the cooldown")
	for _, c := range be.snapshot() {
		require.False(t, !c.Before(second.Add(inflightSlack)) && c.Before(o[1].openUntil), "a call reached the backend while it was open again")
	}
	// Every worker deferred tasks: the breaker is the fleet's.
	st := tasks.NewStore(rdb)
	deferredBy := map[string]int{}
	for _, id := range ids {
		v, err := st.Get(t.Context(), id)
		require.NoError(t, err)
		for _, ev := range v.History {
			if ev.Event == tasks.EventDeferred {
				deferredBy[ev.Worker]++
			}
		}
	}
	t.Logf("deferrals by worker: %v", deferredBy)
	require.Len(t, deferredBy, 3, "every worker defers while the breaker is open")
}

// TestProviderPauseWithoutLimits (issue 24): an HTTP agent that configures
// no limits still honours a 429 with Retry-After fleet-wide: the reply
// pauses its breaker key (3 worker processes: no call reaches the backend
// until the reset), and it is back-pressure, not sickness — a breaker that
// a single counted failure would open stays closed and counts nothing.
func TestProviderPauseWithoutLimits(t *testing.T) {
	t.Parallel()
	const (
		key   = "llm.paused"
		reset = 2 * time.Second
	)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	var (
		mu       sync.Mutex
		arrivals []time.Time
		limited  time.Time
	)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		first := len(arrivals) == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
			mu.Lock()
			limited = time.Now()
			mu.Unlock()
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(be.Close)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 10, shutdown_timeout: 5s}
defaults: {timeout: 10s}
agents:
  llm:
    http: {url: %q}
    breaker_key: %s
    circuit_breaker: {mode: consecutive, failure_threshold: 1, cooldown: 30s}
`, be.URL+"/v1/chat", key))
	events := watchBreaker(t, rdb, key)
	for i := range 3 {
		ops := freeAddr(t)
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
		waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	}
	first := enqueueN(t, b, srv.URL(), "first", 1)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return !limited.IsZero() }, 20*time.Second, 5*time.Millisecond)
	ids := append(first, enqueueN(t, b, srv.URL(), "after", 30)...)
	views := waitStates(t, rdb, ids, 40*time.Second)
	for id, v := range views {
		require.Equal(t, tasks.StateSucceeded, v.State, "task %s: %+v", id, v.History)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, arrivals, 32, "the rate-limited call, its retry and 30 others")
	for _, a := range arrivals[1:] {
		require.False(t, a.Before(limited.Add(reset-50*time.Millisecond)),
			"a call arrived %s after the 429 that said to wait %s", a.Sub(limited), reset)
	}
	for _, ev := range events() {
		require.NotEqual(t, string(breaker.StateOpen), ev.State, "a 429 with Retry-After opened the breaker")
	}
	snap, err := breaker.New(rdb).Get(t.Context(), key)
	require.NoError(t, err)
	require.Zero(t, snap.FailureCount, "back-pressure is not a breaker failure")
	paused := 0
	for _, v := range views {
		for _, ev := range v.History {
			if ev.Event == tasks.EventDeferred && strings.Contains(ev.Error, "paused by the provider") {
				paused++
			}
		}
	}
	t.Logf("%d deferrals named the provider's pause", paused)
}
