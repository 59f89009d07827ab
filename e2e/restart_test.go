package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/tasks"
)

// runKey names the calls of one run: a task and its restart number.
type runKey struct {
	task    string
	restart int
}

// flakyBackend is an HTTP agent backend on loopback that answers 503 while
// down(task, restart) says so, and counts the calls of every run from the
// ActionRequest's task_id and restart fields.
type flakyBackend struct {
	srv   *httptest.Server
	down  func(task string, restart int) bool
	mu    sync.Mutex
	calls map[runKey]int
}

func newFlakyBackend(t *testing.T, down func(task string, restart int) bool) *flakyBackend {
	b := &flakyBackend{down: down, calls: map[runKey]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID  string `json:"task_id"`
			Restart int    `json:"restart"`
			Attempt int    `json:"attempt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusTeapot)
			return
		}
		b.mu.Lock()
		b.calls[runKey{req.TaskID, req.Restart}]++
		b.mu.Unlock()
		if b.down(req.TaskID, req.Restart) {
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"answer":42,"task":%q,"restart":%d}`, req.TaskID, req.Restart)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// runs returns the backend calls of task by restart number.
func (b *flakyBackend) runs(task string) map[int]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int]int{}
	for k, n := range b.calls {
		if k.task == task {
			out[k.restart] = n
		}
	}
	return out
}

// attemptEvents counts, per restart number, the history events that record
// the outcome of an attempt.
func attemptEvents(h []tasks.Event) map[int]int {
	out := map[int]int{}
	for _, ev := range h {
		switch ev.Event {
		case tasks.EventSucceeded, tasks.EventFailed, tasks.EventRetrying, tasks.EventRestarting, tasks.EventDeadLettered:
			if ev.Attempt > 0 {
				out[ev.Restart]++
			}
		}
	}
	return out
}

func eventsOf(h []tasks.Event, kind string) []tasks.Event {
	var out []tasks.Event
	for _, ev := range h {
		if ev.Event == kind {
			out = append(out, ev)
		}
	}
	return out
}

func eventNames(h []tasks.Event) []string {
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.Event
	}
	return out
}

// restartConfig is a worker config for an HTTP agent "llm" at url with
// two attempts per run and a breaker that never opens.
func restartConfig(t *testing.T, url, restartBlock string) string {
	return writeConfig(t, fmt.Sprintf(`
worker:
  concurrency: 8
  shutdown_timeout: 5s
defaults:
  timeout: 5s
  retry: {max_attempts: 2, initial_backoff: 100ms, max_backoff: 200ms, jitter: 0.1}
  circuit_breaker: {failure_threshold: 1000, cooldown: 1s}
  restart: %s
agents:
  llm:
    http: {url: %q}
`, restartBlock, url))
}

// enqueue enqueues tasks of agent llm with the given IDs.
func enqueueLLM(t *testing.T, b bins, redisURL string, ids ...string) {
	t.Helper()
	var lines []string
	for _, id := range ids {
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","action":"chat","params":{"q":%q}}`, id, id))
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", redisURL, "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, strings.Fields(out))
}

// inspectorRestarts runs `inspector restarts --json`.
func inspectorRestarts(t *testing.T, b bins, redisURL string) []restart.Pending {
	t.Helper()
	out, errOut, code := run(t, "", b.inspector, "--redis", redisURL, "restarts", "--json")
	require.Equal(t, 0, code, errOut)
	var list []restart.Pending
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var p restart.Pending
		require.NoError(t, json.Unmarshal([]byte(line), &p), line)
		list = append(list, p)
	}
	return list
}

// dlqShow runs `inspector dlq show ID --json`.
func dlqShow(t *testing.T, b bins, redisURL, id string) deadletter.Entry {
	t.Helper()
	out, errOut, code := run(t, "", b.inspector, "--redis", redisURL, "dlq", "show", id, "--json")
	require.Equal(t, 0, code, errOut)
	var e deadletter.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &e), out)
	return e
}

// poll calls cond until it returns true or d passes.
func poll(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartRecoversWhenBackendReturns: a backend that is down (503) for
// longer than a run's retries gets its tasks restarted after 1s, 2s, …;
// while they wait, `inspector restarts --json` lists them with due time and
// restart number; when the backend returns they succeed. Every run before
// the last used both attempts, and the history says so.
func TestRestartRecoversWhenBackendReturns(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	var down atomic.Bool
	down.Store(true)
	be := newFlakyBackend(t, func(string, int) bool { return down.Load() })
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 3, delays: [1s, 2s, 4s]}")
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	ids := []string{"rs-1", "rs-2", "rs-3"}
	enqueueLLM(t, b, srv.URL(), ids...)

	// While they wait, the inspector lists them with due time and restart number.
	seen := map[string]restart.Pending{}
	poll(t, 20*time.Second, "inspector restarts to list every task", func() bool {
		before := time.Now()
		listed := inspectorRestarts(t, b, srv.URL())
		after := time.Now() // a loaded machine may take seconds to run the inspector
		for _, p := range listed {
			require.Equal(t, "llm", p.Agent, p.ID)
			require.Equal(t, "chat", p.Action, p.ID)
			require.Contains(t, ids, p.ID)
			// Due within the longest delay (4s) of when it was listed; never
			// long past.
			require.True(t, p.DueAt.After(before.Add(-5*time.Second)) && p.DueAt.Before(after.Add(5*time.Second)),
				"%s due at %s, listed between %s and %s", p.ID, p.DueAt, before, after)
			if p.Restart >= 1 && p.Class != "" {
				require.Equal(t, "provider_error", p.Class, p.ID)
				require.Contains(t, p.Error, "503", p.ID)
				seen[p.ID] = p
			}
		}
		return len(seen) == len(ids)
	})

	// Let every task use at least two restarts, then bring the backend back.
	st := tasks.NewStore(rdb)
	poll(t, 30*time.Second, "two restarts of every task", func() bool {
		for _, id := range ids {
			v, err := st.Get(context.Background(), id)
			if err != nil || v.Restarts < 2 {
				return false
			}
		}
		return true
	})
	down.Store(false)

	views := waitStates(t, rdb, ids, 30*time.Second)
	delays := []int64{1000, 2000, 4000}
	for _, id := range ids {
		v := views[id]
		require.Equal(t, tasks.StateSucceeded, v.State, id)
		require.GreaterOrEqual(t, v.Restarts, 2, id)
		require.LessOrEqual(t, v.Restarts, 3, id)
		require.Equal(t, v.Restarts, v.Run, id)
		require.Empty(t, v.ErrorClass, id)

		restarting := eventsOf(v.History, tasks.EventRestarting)
		require.Len(t, restarting, v.Restarts, "%s: %v", id, eventNames(v.History))
		for k, ev := range restarting {
			require.Equal(t, k, ev.Restart, "%s: restart %d is scheduled by the run before it", id, k+1)
			require.Equal(t, 2, ev.Attempt, id)
			require.Equal(t, delays[k], ev.DelayMS, id)
			require.Equal(t, "provider_error", ev.ErrorClass, id)
		}
		succ := eventsOf(v.History, tasks.EventSucceeded)
		require.Len(t, succ, 1, id)
		require.Equal(t, v.Restarts, succ[0].Restart, id)
		require.Equal(t, tasks.EventSucceeded, v.History[len(v.History)-1].Event, id)

		// Every attempt of every run is in the history, and reached the backend.
		perRun := attemptEvents(v.History)
		calls := be.runs(id)
		for r := 0; r < v.Restarts; r++ {
			require.Equal(t, 2, perRun[r], "%s: attempts of restart %d", id, r)
		}
		require.Contains(t, []int{1, 2}, perRun[v.Restarts], id)
		require.Equal(t, perRun, calls, "%s: backend calls per restart = attempts in history", id)
	}
	require.Empty(t, inspectorRestarts(t, b, srv.URL()), "nothing waits for a restart any more")
	require.Equal(t, 0, w.stop(t, 15*time.Second))
}

// TestRestartsExhausted: a backend down for longer than every restart:
// after max_restarts (2) the task is dead-lettered with reason
// restarts_exhausted, and `inspector dlq show --json` holds every attempt of
// every run.
func TestRestartsExhausted(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newFlakyBackend(t, func(string, int) bool { return true })
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 2, delays: [500ms, 1s]}")
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	ids := []string{"ex-1", "ex-2"}
	enqueueLLM(t, b, srv.URL(), ids...)
	views := waitStates(t, rdb, ids, 40*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateDeadLettered, views[id].State, id)
		e := dlqShow(t, b, srv.URL(), id)
		require.Equal(t, restart.ReasonExhausted, e.Reason, id)
		require.Equal(t, "provider_error", e.ErrorClass, id)
		require.Equal(t, 2, e.Restarts, id)
		require.Equal(t, 6, e.Attempts, id)
		require.JSONEq(t, fmt.Sprintf(`{"q":%q}`, id), string(e.Params), id)
		require.Equal(t, []string{"queued", "retrying", "restarting", "retrying", "restarting", "retrying", "dead_lettered"},
			eventNames(e.History), id)
		require.Equal(t, map[int]int{0: 2, 1: 2, 2: 2}, attemptEvents(e.History), "%s: attempts per restart", id)
		for i, ev := range eventsOf(e.History, tasks.EventRestarting) {
			require.Equal(t, []int64{500, 1000}[i], ev.DelayMS, id)
		}
		require.Equal(t, map[int]int{0: 2, 1: 2, 2: 2}, be.runs(id), "%s: backend calls per restart", id)
	}
	require.Empty(t, inspectorRestarts(t, b, srv.URL()))
}

// TestRestartQueueFull: with max_pending 1, of two tasks that both need a
// restart one waits for it and the other is dead-lettered at once with
// reason restart_queue_full.
func TestRestartQueueFull(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newFlakyBackend(t, func(string, int) bool { return true })
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 3, delays: [1m], max_pending: 1}")
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	ids := []string{"qf-1", "qf-2"}
	enqueueLLM(t, b, srv.URL(), ids...)
	st := tasks.NewStore(rdb)
	states := map[string]*tasks.View{}
	poll(t, 30*time.Second, "one task restarting, one dead-lettered", func() bool {
		for _, id := range ids {
			v, err := st.Get(context.Background(), id)
			if err != nil {
				return false
			}
			states[id] = v
		}
		a, c := states["qf-1"].State, states["qf-2"].State
		return (a == tasks.StateRestarting && c == tasks.StateDeadLettered) ||
			(a == tasks.StateDeadLettered && c == tasks.StateRestarting)
	})
	waiting, dead := "qf-1", "qf-2"
	if states["qf-1"].State == tasks.StateDeadLettered {
		waiting, dead = dead, waiting
	}
	e := dlqShow(t, b, srv.URL(), dead)
	require.Equal(t, restart.ReasonQueueFull, e.Reason)
	require.Equal(t, "provider_error", e.ErrorClass)
	require.Equal(t, 0, e.Restarts)
	require.Equal(t, 2, e.Attempts)

	list := inspectorRestarts(t, b, srv.URL())
	require.Len(t, list, 1)
	require.Equal(t, waiting, list[0].ID)
	require.Equal(t, 1, list[0].Restart)
	require.WithinDuration(t, time.Now().Add(time.Minute), list[0].DueAt, 10*time.Second)
	require.Equal(t, 1, states[waiting].Restarts)
}

// TestNeverRestarted: logic_error, invalid_request and context_length end a
// task after one attempt, with reason not_retryable and no restart, even
// with retries and restarts configured.
func TestNeverRestarted(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	var mu sync.Mutex
	calls := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		switch r.URL.Path {
		case "/ctx":
			fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9012 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
		default:
			fmt.Fprint(w, `{"error":{"message":"Invalid 'messages': expected an array","type":"invalid_request_error","code":null}}`)
		}
	}))
	t.Cleanup(api.Close)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 5s
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms}
  circuit_breaker: {failure_threshold: 1000, cooldown: 1s}
  restart: {max_restarts: 3, delays: [500ms]}
agents:
  tool: {exec: {command: [%q], env: [PATH]}}
  bad: {http: {url: %q}}
  long: {http: {url: %q}}
`, b.agent, api.URL+"/bad", api.URL+"/ctx"))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	lines := []string{
		`{"id":"nr-logic","agent":"tool","params":{"mode":"garbage"}}`,
		`{"id":"nr-logic-2","agent":"tool","params":{"mode":"error","code":422,"error":"unprocessable: field x is required"}}`,
		`{"id":"nr-invalid","agent":"bad","params":{}}`,
		`{"id":"nr-ctx","agent":"long","params":{}}`,
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	ids := strings.Fields(out)
	views := waitStates(t, rdb, ids, 30*time.Second)
	for _, tc := range []struct{ id, class string }{
		{"nr-logic", "logic_error"},
		{"nr-logic-2", "invalid_request"},
		{"nr-invalid", "invalid_request"},
		{"nr-ctx", "context_length"},
	} {
		v := views[tc.id]
		require.Equal(t, tasks.StateDeadLettered, v.State, tc.id)
		require.Equal(t, tc.class, v.ErrorClass, tc.id)
		require.Equal(t, 1, v.Attempts, tc.id)
		require.Equal(t, 0, v.Restarts, tc.id)
		require.Empty(t, eventsOf(v.History, tasks.EventRestarting), tc.id)
		require.Empty(t, eventsOf(v.History, tasks.EventRetrying), tc.id)
		e := dlqShow(t, b, srv.URL(), tc.id)
		require.Equal(t, "not_retryable", e.Reason, tc.id)
		require.Equal(t, 1, e.Attempts, tc.id)
		require.Equal(t, 0, e.Restarts, tc.id)
		require.Equal(t, tc.class, e.ErrorClass, tc.id)
	}
	mu.Lock()
	require.Equal(t, map[string]int{"/bad": 1, "/ctx": 1}, calls, "one call each, never again")
	mu.Unlock()
	require.Empty(t, inspectorRestarts(t, b, srv.URL()))
}

// TestRestartCrashExactlyOnce: a worker killed (SIGKILL) right after it
// scheduled a restart, before asynq acknowledged the run, leaves the run
// leased. When the lease is recovered the stale delivery is dropped: the
// task is restarted exactly once, each run calls the backend as often as it
// made attempts, and the task ends succeeded.
//
// The failpoint AGENTQ_FAILPOINT=after_restart_scheduled kills the first
// worker at that exact point. asynq recovers a lease only 30 s after it
// expired (its clock-skew allowance) and its lease lasts 30 s, so the test
// moves the dead worker's lease expiry into the past instead of waiting a
// minute: what asynq's recoverer does next is unchanged.
func TestRestartCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	// Down for the first run (restart 0) only.
	be := newFlakyBackend(t, func(_ string, restart int) bool { return restart == 0 })
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 3, delays: [1s, 2s, 4s]}")

	crashAtFailpoint(t, b, srv, cfg, "after_restart_scheduled", "crash-1")

	// The crash window: the restart is scheduled and recorded, the run is still leased.
	st := tasks.NewStore(rdb)
	v, err := st.Get(ctx, "crash-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateRestarting, v.State)
	require.Equal(t, 1, v.Run)
	require.Equal(t, 1, v.Restarts)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info, err := insp.GetTaskInfo(tasks.DefaultQueue, "crash-1")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateActive, info.State, "run 0 was never acknowledged")
	_, err = insp.GetTaskInfo(tasks.DefaultQueue, "crash-1#1")
	require.NoError(t, err, "restart 1 is scheduled")
	// The listing follows the record, not run 0's leased entry: listed once,
	// restarting (issue #39: it was also listed active, reading restarting).
	requireListedOnce(t, rdb, "crash-1", record.StateRestarting)

	expireLease(t, rdb, "crash-1")

	// A second worker, without the failpoint: it recovers the stale run 0
	// (its recoverer runs at start) and runs restart 1.
	w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	views := waitStates(t, rdb, []string{"crash-1"}, 30*time.Second)
	poll(t, 30*time.Second, "the stale delivery of run 0 to be dropped", func() bool {
		_, err := insp.GetTaskInfo(tasks.DefaultQueue, "crash-1")
		if !errors.Is(err, asynq.ErrTaskNotFound) {
			return false
		}
		// Dropped by the record's fence (run 1 had started), or, when the
		// recoverer beat run 1's due time, because run 1 was already
		// scheduled: both drop run 0 without calling the backend.
		log, _ := os.ReadFile(w2.log)
		return strings.Contains(string(log), "dropping stale delivery") ||
			strings.Contains(string(log), "dropping a redelivered run whose next run (a restart or a resume) was already scheduled")
	})

	v = views["crash-1"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Restarts)
	require.Equal(t, []string{"queued", "retrying", "restarting", "succeeded"}, eventNames(v.History))
	require.Equal(t, map[int]int{0: 2, 1: 1}, attemptEvents(v.History))
	require.Equal(t, map[int]int{0: 2, 1: 1}, be.runs("crash-1"), "backend calls per restart: exactly one run each")

	// Nothing else is scheduled, and the final state holds after the stale delivery was dropped.
	for _, id := range []string{"crash-1#1", "crash-1#2"} {
		_, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		require.ErrorIs(t, err, asynq.ErrTaskNotFound, id)
	}
	v, err = st.Get(ctx, "crash-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Len(t, v.History, 4)
	require.Empty(t, inspectorRestarts(t, b, srv.URL()))
	require.Equal(t, 0, w2.stop(t, 15*time.Second))
}

// TestRestartCrashBeforeRecording: a worker killed after it scheduled a
// restart but before it recorded it leaves the record at run 0, so the
// record cannot fence the redelivered run 0. The next run's presence in
// asynq does: the redelivery is dropped, the missed "restarting" is
// recorded, and each run reaches the backend exactly once per attempt.
func TestRestartCrashBeforeRecording(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	be := newFlakyBackend(t, func(_ string, restart int) bool { return restart == 0 })
	// The restart waits 6s: run 0 is redelivered (about 1s after worker 2
	// starts) while run 1 is still scheduled.
	cfg := restartConfig(t, be.srv.URL, "{max_restarts: 3, delays: [6s, 6s, 6s]}")

	crashAtFailpoint(t, b, srv, cfg, "before_restart_recorded", "crash-2")
	st := tasks.NewStore(rdb)
	v, err := st.Get(ctx, "crash-2")
	require.NoError(t, err)
	require.Equal(t, 0, v.Run, "the restart was not recorded")
	insp := asynq.NewInspectorFromRedisClient(rdb)
	_, err = insp.GetTaskInfo(tasks.DefaultQueue, "crash-2#1")
	require.NoError(t, err, "restart 1 is scheduled")

	expireLease(t, rdb, "crash-2")
	w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	views := waitStates(t, rdb, []string{"crash-2"}, 30*time.Second)
	v = views["crash-2"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Restarts)
	require.Equal(t, []string{"queued", "retrying", "restarting", "succeeded"}, eventNames(v.History))
	require.Equal(t, map[int]int{0: 2, 1: 1}, be.runs("crash-2"), "backend calls per restart: exactly one run each")
	log, _ := os.ReadFile(w2.log)
	require.Contains(t, string(log), "dropping a redelivered run whose next run (a restart or a resume) was already scheduled")
	require.Equal(t, 0, w2.stop(t, 15*time.Second))
}

// requireListedOnce requires task id in the task listing (inspector
// tasks, the console, GET /api/v1/tasks) exactly once, listed as state and
// reading state.
func requireListedOnce(t *testing.T, rdb redis.UniversalClient, id string, state record.State) {
	t.Helper()
	page, err := inspect.Tasks(context.Background(), rdb, inspect.TaskFilter{})
	require.NoError(t, err)
	var got []inspect.ListedTask
	for _, tk := range page.Tasks {
		if tk.ID == id {
			got = append(got, tk)
		}
	}
	require.Len(t, got, 1, "task %s listed %d times", id, len(got))
	require.Equal(t, state, got[0].ListedAs)
	require.Equal(t, state, got[0].State)
}

// crashAtFailpoint runs a worker armed with failpoint, enqueues task id and
// waits for the worker to die of SIGKILL at the failpoint.
func crashAtFailpoint(t *testing.T, b bins, srv *redistest.Server, cfg, failpoint, id string) {
	t.Helper()
	w := startEnv(t, "worker-1", []string{"AGENTQ_FAILPOINT=" + failpoint},
		b.worker, "--config", cfg, "--redis", srv.URL())
	enqueueLLM(t, b, srv.URL(), id)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker 1 did not hit the failpoint %s", failpoint)
	}
	var ee *exec.ExitError
	require.True(t, errors.As(w.err, &ee), "worker 1 exit: %v", w.err)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker 1 died of %v", w.err)
}

// expireLease moves the dead worker's lease on task id (asynq:{default}:lease,
// scored in unix seconds) two minutes into the past, so the next worker's
// recoverer takes it at its start instead of a minute or two later.
func expireLease(t *testing.T, rdb *redis.Client, id string) {
	t.Helper()
	ctx := context.Background()
	leaseKey := "asynq:{" + tasks.DefaultQueue + "}:lease"
	_, err := rdb.ZScore(ctx, leaseKey, id).Result()
	require.NoError(t, err, "%s holds a lease", id)
	require.NoError(t, rdb.ZAddXX(ctx, leaseKey, redis.Z{Score: float64(time.Now().Add(-2 * time.Minute).Unix()), Member: id}).Err())
}
