package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// overloadedBody is what OpenAI answers (with a 503) when it is overloaded.
const overloadedBody = `{"error":{"message":"The server is overloaded","type":"server_error"}}`

// call is one request that reached a switchBackend.
type call struct {
	at      time.Time // arrival, wall clock (the same clock redis-server's TIME reads)
	task    string
	attempt int
	restart int
	down    bool // answered 503
}

// switchBackend is an HTTP agent backend on loopback that can be switched
// down (503 "The server is overloaded" after downDelay) and up (200), and
// records every call with its arrival time.
type switchBackend struct {
	srv       *httptest.Server
	down      atomic.Bool
	downDelay time.Duration
	mu        sync.Mutex
	calls     []call
}

func newSwitchBackend(t *testing.T, downDelay time.Duration) *switchBackend {
	b := &switchBackend{downDelay: downDelay}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var req struct {
			TaskID  string `json:"task_id"`
			Attempt int    `json:"attempt"`
			Restart int    `json:"restart"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		down := b.down.Load()
		b.mu.Lock()
		b.calls = append(b.calls, call{at: at, task: req.TaskID, attempt: req.Attempt, restart: req.Restart, down: down})
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if down {
			time.Sleep(b.downDelay)
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, overloadedBody)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"task":%q}`, req.TaskID)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *switchBackend) snapshot() []call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]call(nil), b.calls...)
}

// breakerEvent is one transition announced on rkeys.BreakerChannel(), with
// the breaker's open_until read right after an "open" event.
type breakerEvent struct {
	State      string `json:"state"`
	Key        string `json:"key"`
	Generation int64  `json:"generation"`
	seen       time.Time
	openUntil  time.Time // "open" events only: Redis time
}

// watchBreaker subscribes to the breaker channel (before anything can
// transition) and collects key's events; for each "open" it reads the
// breaker's open_until.
func watchBreaker(t *testing.T, rdb *redis.Client, key string) (events func() []breakerEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ps := rdb.Subscribe(ctx, rkeys.BreakerChannel())
	_, err := ps.Receive(ctx) // the subscription confirmation
	require.NoError(t, err)
	br := breaker.New(rdb)
	var mu sync.Mutex
	var evs []breakerEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			var ev breakerEvent
			if json.Unmarshal([]byte(m.Payload), &ev) != nil || ev.Key != key {
				continue
			}
			ev.seen = time.Now()
			if ev.State == string(breaker.StateOpen) {
				if s, err := br.Get(ctx, key); err == nil && s.Generation == ev.Generation && s.OpenUntil != nil {
					ev.openUntil = *s.OpenUntil
				}
			}
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ps.Close(); cancel(); <-done })
	return func() []breakerEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]breakerEvent(nil), evs...)
	}
}

// TestBreakerSharedAcrossWorkers: three worker processes share one breaker
// in Redis. With the backend down, the breaker opens after 3 consecutive
// failures; from then until its cooldown ends no worker calls the backend;
// each half-open episode admits at most one trial cluster-wide; tasks are
// deferred meanwhile without using attempts. When the backend comes back,
// every task succeeds, nothing is dead-lettered and the breaker is closed.
func TestBreakerSharedAcrossWorkers(t *testing.T) {
	t.Parallel()
	const (
		nTasks    = 20
		cooldown  = 3 * time.Second
		downDelay = 300 * time.Millisecond
		// inflightSlack: calls admitted in CLOSED just before the breaker
		// opened may reach the backend just after it. Every task is taken in
		// the first wave (3×8 slots ≥ 20 tasks) and the backend answers after
		// downDelay, so such calls arrive long before the 3rd failure is
		// recorded; the slack only absorbs the floor of Redis TIME to whole
		// milliseconds and one scheduling hiccup of a late pickup.
		inflightSlack = 25 * time.Millisecond
	)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newSwitchBackend(t, downDelay)
	be.down.Store(true)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 8, shutdown_timeout: 5s}
defaults:
  timeout: 5s
agents:
  llm:
    http: {url: %q}
    breaker_key: llm.loopback
    circuit_breaker: {mode: consecutive, failure_threshold: 3, cooldown: 3s, max_cooldown: 3s, half_open_max_calls: 1}
    retry: {max_attempts: 2, initial_backoff: 100ms, max_backoff: 200ms}
    restart: {max_restarts: 20, delays: [500ms, 1s]}
`, be.srv.URL+"/v1/chat"))
	const key = "llm.loopback"
	events := watchBreaker(t, rdb, key)

	workers := make([]*proc, 3)
	for i := range workers {
		ops := freeAddr(t)
		workers[i] = start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
		waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	}

	var lines, ids []string
	for i := range nTasks {
		id := fmt.Sprintf("llm-%02d", i)
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","action":"chat","params":{"n":%d}}`, id, i))
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Len(t, strings.Fields(out), nTasks)

	// Wait for the first opening and then two reopenings (two half-open
	// episodes whose trial failed) while the backend stays down.
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
	for len(opens()) < 3 {
		require.True(t, time.Now().Before(deadline), "breaker did not open and reopen twice within 30s; events: %+v", events())
		time.Sleep(20 * time.Millisecond)
	}
	// While the breaker is open, the inspector shows it open and unhealthy,
	// and the ops API of a worker agrees (the state is shared).
	snap, err := breaker.New(rdb).Get(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, breaker.StateOpen, snap.State)
	require.Equal(t, breaker.HealthUnhealthy, snap.Health)

	be.down.Store(false)
	upAt := time.Now()
	views := waitStates(t, rdb, ids, 40*time.Second)
	t.Logf("all %d tasks terminal %s after the backend came back", nTasks, time.Since(upAt).Round(time.Millisecond))

	// Analyse the calls against the breaker's open intervals (Redis time).
	calls := be.snapshot()
	sort.Slice(calls, func(i, j int) bool { return calls[i].at.Before(calls[j].at) })
	o := opens()
	for i, ev := range o {
		require.False(t, ev.openUntil.IsZero(), "open event %d: open_until not read (generation changed too fast?)", i)
	}
	type interval struct{ from, to time.Time }
	var openIvs []interval
	for _, ev := range o {
		openIvs = append(openIvs, interval{from: ev.openUntil.Add(-cooldown), to: ev.openUntil})
	}
	for i, iv := range openIvs {
		from := iv.from
		if i == 0 {
			from = from.Add(inflightSlack)
		}
		inflight := 0
		for _, c := range calls {
			if i == 0 && !c.at.Before(iv.from) && c.at.Before(from) {
				inflight++
			}
			require.False(t, !c.at.Before(from) && c.at.Before(iv.to),
				"call %+v reached the backend while the breaker was open (%s → %s, open #%d)", c, iv.from.Format(time.RFC3339Nano), iv.to.Format(time.RFC3339Nano), i)
		}
		if i == 0 {
			t.Logf("first opening at %s; %d call(s) arrived within the %s in-flight slack after it", iv.from.Format("15:04:05.000"), inflight, inflightSlack)
		}
	}
	// Half-open episodes that ended with a reopen (backend still down): at
	// most half_open_max_calls = 1 trial each, cluster-wide.
	for i := 0; i+1 < len(openIvs); i++ {
		from, to := openIvs[i].to, openIvs[i+1].from
		var trials []call
		for _, c := range calls {
			if !c.at.Before(from) && c.at.Before(to) {
				trials = append(trials, c)
			}
		}
		require.LessOrEqual(t, len(trials), 1, "half-open episode %d (%s → %s) admitted %d trials: %+v", i, from, to, len(trials), trials)
		require.Len(t, trials, 1, "half-open episode %d ended in a reopen, so a trial must have failed", i)
		require.True(t, trials[0].down)
	}
	// No call while down except before the first opening and the trials.
	downCalls := 0
	for _, c := range calls {
		if c.down {
			downCalls++
		}
	}
	t.Logf("backend calls: %d total, %d while down; breaker opened %d times", len(calls), downCalls, len(o))

	// Every task succeeded, none dead-lettered, each was deferred without
	// using an attempt, and a deferral waited for the breaker rather than
	// spinning (a handful per half-open cycle, not one per forwarder tick).
	maxDeferred := 0
	defer func() { t.Logf("most deferrals of one task: %d", maxDeferred) }()
	for _, id := range ids {
		v := views[id]
		require.Equal(t, tasks.StateSucceeded, v.State, id)
		deferred := 0
		for _, ev := range v.History {
			switch ev.Event {
			case tasks.EventDeferred:
				deferred++
				require.Zero(t, ev.Attempt, "%s: a deferral is not an attempt", id)
				require.Positive(t, ev.DelayMS, id)
				require.Contains(t, ev.Error, key, id)
			case tasks.EventSucceeded:
				require.LessOrEqual(t, ev.Attempt, 2, "%s: deferrals must not use attempts", id)
			}
		}
		require.Positive(t, deferred, "%s was never deferred although the breaker was open", id)
		require.LessOrEqual(t, deferred, 20, "%s deferred %d times in a ~10s outage: deferrals spin", id, deferred)
		maxDeferred = max(maxDeferred, deferred)
	}
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "list", "--json")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, strings.TrimSpace(out), "nothing may be dead-lettered during an outage shorter than the restart budget")

	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "breakers", "--json")
	require.Equal(t, 0, code, errOut)
	var bs breaker.Snapshot
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &bs), out)
	require.Equal(t, key, bs.Key)
	require.Equal(t, breaker.StateClosed, bs.State)
	require.Zero(t, bs.ConsecutiveFailures)
	require.GreaterOrEqual(t, bs.FailureCount, int64(3))

	for _, w := range workers {
		require.Equal(t, 0, w.stop(t, 15*time.Second))
	}
}

// TestInspectorBreakerTripAndReset: `inspector breaker trip KEY --for DUR`
// makes every worker defer that agent's tasks (no call reaches the backend
// while tripped, history shows "deferred", no attempt used); they run once
// the trip ends. `inspector breaker reset KEY` lets deferred tasks run at
// once, long before their trip would have ended.
func TestInspectorBreakerTripAndReset(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newSwitchBackend(t, 0)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults: {timeout: 5s}
agents:
  llm:
    http: {url: %q}
    breaker_key: llm.trip
`, be.srv.URL+"/v1/chat"))
	const key = "llm.trip"
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	br := breaker.New(rdb)
	st := tasks.NewStore(rdb)

	enqueue := func(prefix string, n int) []string {
		var lines, ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			ids = append(ids, id)
			lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","params":{"n":%d}}`, id, i))
		}
		_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
		require.Equal(t, 0, code, errOut)
		return ids
	}
	trip := func(d string) time.Time {
		out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "breaker", "trip", key, "--for", d)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "tripped")
		s, err := br.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, breaker.StateOpen, s.State)
		require.NotNil(t, s.OpenUntil)
		return *s.OpenUntil
	}
	callsOf := func(ids []string) []call {
		var out []call
		for _, c := range be.snapshot() {
			for _, id := range ids {
				if c.task == id {
					out = append(out, c)
				}
			}
		}
		return out
	}
	// waitDeferred waits until every task has been deferred at least once.
	// It reads the history, not the current state: on a loaded machine a
	// short trip may end, and the task run, before the poll sees "deferred".
	waitDeferred := func(ids []string) {
		deadline := time.Now().Add(15 * time.Second)
		for _, id := range ids {
			for {
				v, err := st.Get(t.Context(), id)
				if err == nil && slices.ContainsFunc(v.History, func(ev tasks.Event) bool { return ev.Event == tasks.EventDeferred }) {
					break
				}
				require.True(t, time.Now().Before(deadline), "%s not deferred: %+v", id, v)
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	// checkHistory: each task succeeded at its first attempt after at most
	// maxDeferred deferrals (a deferral waits for the breaker; it does not
	// spin on asynq's forwarder tick).
	checkHistory := func(views map[string]*tasks.View, maxDeferred int) {
		for id, v := range views {
			require.Equal(t, tasks.StateSucceeded, v.State, id)
			var evs []string
			deferred := 0
			for _, ev := range v.History {
				evs = append(evs, ev.Event)
				if ev.Event == tasks.EventDeferred {
					deferred++
					require.Zero(t, ev.Attempt, "%s: a deferral is not an attempt", id)
				}
				if ev.Event == tasks.EventSucceeded {
					require.Equal(t, 1, ev.Attempt, "%s: deferrals used no attempt", id)
				}
			}
			require.Contains(t, evs, tasks.EventDeferred, id)
			require.LessOrEqual(t, deferred, maxDeferred, "%s: %v", id, evs)
			require.Equal(t, tasks.EventSucceeded, evs[len(evs)-1], id)
		}
	}

	// 1. Tripped for 2s: tasks are deferred, nothing reaches the backend
	// before open_until, then they run.
	// The enqueue (a subprocess) must end well before the trip does, or
	// the tasks meet a breaker that is half-open already: on a machine
	// too busy for that, trip again for twice as long, with new tasks.
	var openUntil time.Time
	var ids []string
	for d, k := 2*time.Second, 0; ; d, k = d*2, k+1 {
		openUntil = trip(d.String())
		ids = enqueue(fmt.Sprintf("tripped%d", k), 3)
		if time.Until(openUntil) > d/2 || k == 3 {
			break
		}
	}
	waitDeferred(ids)
	views := waitStates(t, rdb, ids, 20*time.Second)
	checkHistory(views, 4)
	calls := callsOf(ids)
	require.Len(t, calls, 3, "one call per task once the trip ended")
	for _, c := range calls {
		require.False(t, c.at.Before(openUntil), "call %+v reached the backend before the trip ended at %s", c, openUntil)
	}
	s, err := br.Get(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, s.State, "the trials succeeded")

	// 2. Tripped for 30s, then reset: the deferred tasks run at once.
	trip("30s")
	ids = enqueue("reset", 3)
	waitDeferred(ids)
	time.Sleep(200 * time.Millisecond) // give a wrong admission the chance to show
	require.Empty(t, callsOf(ids), "no call while tripped")
	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "breaker", "reset", key)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "reset")
	resetAt := time.Now()
	views = waitStates(t, rdb, ids, 20*time.Second)
	took := time.Since(resetAt)
	t.Logf("deferred tasks done %s after the reset", took.Round(time.Millisecond))
	require.Less(t, took, 5*time.Second, "a reset must let deferred tasks run at once, not after the 30s trip")
	checkHistory(views, 2)
	require.Len(t, callsOf(ids), 3)

	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "breakers", "--json")
	require.Equal(t, 0, code, errOut)
	var bs breaker.Snapshot
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &bs), out)
	require.Equal(t, breaker.StateClosed, bs.State)
	require.Equal(t, breaker.HealthHealthy, bs.Health)
	require.Equal(t, 0, w.stop(t, 15*time.Second))
}
