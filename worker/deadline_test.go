package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// deadlineGone reports whether pid no longer runs: it does not exist, or
// it is a zombie waiting to be reaped.
func deadlineGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// requireDeadLetteredByDeadline checks that task id ended dead_lettered
// with reason deadline_exceeded and class timeout, in its record and in
// the dead letters.
func requireDeadLetteredByDeadline(t *testing.T, v *tasks.View, dlq *deadletter.Store) {
	t.Helper()
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, ReasonDeadlineExceeded, v.Reason)
	require.Equal(t, string(resilience.Timeout), v.ErrorClass)
	require.Contains(t, v.Error, "deadline exceeded")
	require.NotEmpty(t, v.Deadline, "the task JSON shows its deadline")
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventDeadLettered, last.Event, "%v", eventsOf(v))
	require.Equal(t, ReasonDeadlineExceeded, last.Reason)
	e, err := dlq.Get(context.Background(), v.ID)
	require.NoError(t, err)
	require.Equal(t, ReasonDeadlineExceeded, e.Reason)
	require.Equal(t, string(resilience.Timeout), e.ErrorClass)
}

// TestDeadlineStopsRunningExecAgent: a task whose deadline passes while
// its exec agent runs (a real subprocess, and a child of it, that sleep
// far longer than the deadline and than nothing but the agent's own
// timeout) has its process group stopped at the deadline and ends
// dead_lettered (deadline_exceeded, class timeout), not retried or
// restarted, and its breaker counts nothing.
func TestDeadlineStopsRunningExecAgent(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	w, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 1m
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 2, delays: [10ms]}
  circuit_breaker: {failure_threshold: 1, cooldown: 1h}
agents:
  sleeper:
    exec: {command: [sh, -c, 'sleep 120 & echo $$ $! > %s; wait'], env: [PATH]}
`, pidFile))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	const within = 1500 * time.Millisecond
	start := time.Now()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "sleepy", Agent: "sleeper"}, tasks.Within(within))
	require.NoError(t, err)

	var pids []int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		return len(pids) == 2
	}, 10*time.Second, 10*time.Millisecond, "the agent never started")

	v := waitState(t, rdb, "sleepy", 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	ended := time.Since(start)
	requireDeadLetteredByDeadline(t, v, deadletter.NewStore(rdb))
	require.GreaterOrEqual(t, ended, within-100*time.Millisecond, "not before its deadline")
	require.Less(t, ended, within+20*time.Second, "at its deadline, not at the agent's timeout (1m)")
	require.Eventually(t, func() bool { return deadlineGone(pids[0]) && deadlineGone(pids[1]) },
		10*time.Second, 10*time.Millisecond, "the agent's process group survived: %v", pids)
	require.Equal(t, 1, v.Attempts)
	require.Zero(t, counterValue(t, w, "agentq_retries_total", nil))
	require.Zero(t, counterValue(t, w, "agentq_restarts_total", nil))
	asynqGone(t, rdb, "sleepy", 10*time.Second)
}

// TestDeadlineWaitingTask: a task still waiting at its deadline (on a
// queue no worker serves) is dead-lettered by the fleet's sweeper at its
// deadline, without its agent ever being called; its run is taken off its
// queue and its deadline index entry dropped. A task that succeeded before
// its deadline stays succeeded, and its entry is dropped too.
func TestDeadlineWaitingTask(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
agents:
  tool: {}
`, WithAgent("tool", agent.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if r.TaskID == "parked" {
			calls.Add(1)
		}
		return json.RawMessage(`{"ok":true}`), nil
	})))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	const within = time.Second
	start := time.Now()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "parked", Agent: "tool", Queue: "parked", Deadline: start.Add(within)})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "quick", Agent: "tool"}, tasks.Within(within))
	require.NoError(t, err)
	n, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "each task with a deadline is in the index")

	v := waitState(t, rdb, "parked", 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	ended := time.Since(start)
	requireDeadLetteredByDeadline(t, v, deadletter.NewStore(rdb))
	require.GreaterOrEqual(t, ended, within-100*time.Millisecond, "not before its deadline")
	require.Less(t, ended, within+20*time.Second)
	require.Zero(t, v.Attempts)
	require.Zero(t, calls.Load(), "the waiting task's agent was called")

	// The sweeper writes the dead letter first (waiters learn of it at
	// once), then takes the run off its queue: poll for that second step.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	require.Eventually(t, func() bool {
		_, err := insp.GetTaskInfo("parked", "parked")
		return errors.Is(err, asynq.ErrTaskNotFound)
	}, 10*time.Second, 10*time.Millisecond, "the waiting run is taken off its queue")
	require.Eventually(t, func() bool {
		n, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "the index keeps entries of ended tasks")
	q, err := c.Store().Get(ctx, "quick")
	require.NoError(t, err)
	require.Equal(t, tasks.StateSucceeded, q.State, "%v", eventsOf(q))
}

// TestDeadlineStopsRunningHTTPCall: a task whose deadline passes during
// its HTTP agent's call (a loopback backend that answers only when the
// request ends) has the call aborted at the deadline, well before the
// agent's timeout, and ends dead_lettered (deadline_exceeded, timeout).
func TestDeadlineStopsRunningHTTPCall(t *testing.T) {
	t.Parallel()
	aborted := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
			return
		}
		select {
		case aborted <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(backend.Close)
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 1m
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
agents:
  slowapi: {http: {url: %q}}
`, backend.URL))
	c := tasks.NewClient(rdb)
	start := time.Now()
	_, err := c.Enqueue(context.Background(), tasks.Task{ID: "slow-call", Agent: "slowapi"}, tasks.Within(time.Second))
	require.NoError(t, err)
	v := waitState(t, rdb, "slow-call", 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Less(t, time.Since(start), 25*time.Second, "at its deadline, not at the agent's timeout (1m)")
	requireDeadLetteredByDeadline(t, v, deadletter.NewStore(rdb))
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend's request was not aborted")
	}
}
