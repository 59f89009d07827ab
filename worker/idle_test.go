package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// Idle workers wait for work (internal/broker) instead of polling. These
// tests give them a poll interval no test waits out (an hour): a task that
// runs was found through a wake-up, not a poll.
const idleYAML = `
worker: {concurrency: 2, shutdown_timeout: 2s, poll_interval: %s}
defaults:
  timeout: 10s
  retry: {max_attempts: 2, initial_backoff: 200ms, jitter: 0}
agents:
  tool: {}
`

type idleBundle struct {
	w *Worker
	// boundAtCall receives, at each call of the agent, how many idle waits
	// had ended at their bound.
	boundAtCall chan float64
	rdb         *redis.Client
	ctx         context.Context
	stop        func() error // stops the worker, returns Run's error
}

// idleSetup runs a worker (agent "tool", failing with a refused connection
// on attempt 1 of action "flaky") on a fresh redis-server, and returns once
// it waits, idle, for work and listens for due announcements.
func idleSetup(t *testing.T, poll string) idleBundle {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	cfg, err := config.Parse([]byte(fmt.Sprintf("redis: {url: %q}\n"+idleYAML, srv.URL(), poll)), "test.yaml")
	require.NoError(t, err)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	var wp *Worker
	boundAtCall := make(chan float64, 16)
	tool := agent.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		boundAtCall <- counterValue(t, wp, "agentq_idle_waits_total", map[string]string{"end": "bound"})
		if r.Action == "flaky" && r.Attempt == 1 {
			return nil, refused
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	w, err := New(cfg, rdb, WithAgent("tool", tool), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	wp = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopped bool
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("Run did not return within 30s of its context's end")
		}
	}
	t.Cleanup(func() { require.NoError(t, stop()) })
	b := idleBundle{w: w, boundAtCall: boundAtCall, rdb: rdb, ctx: context.Background(), stop: stop}
	require.Eventually(t, func() bool {
		subs, err := rdb.PubSubNumSub(b.ctx, rkeys.DueChannel()).Result()
		return err == nil && subs[rkeys.DueChannel()] == 1 && blockedClients(t, rdb) == 1
	}, 10*time.Second, 5*time.Millisecond, "the worker never waited, idle, for work")
	return b
}

// blockedClients is the server's count of clients blocked in BLPOP.
func blockedClients(t *testing.T, rdb *redis.Client) int {
	info, err := rdb.Info(context.Background(), "clients").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no blocked_clients in INFO clients:\n%s", info)
	return 0
}

func (b idleBundle) waits(t *testing.T, end string) float64 {
	return counterValue(t, b.w, "agentq_idle_waits_total", map[string]string{"end": end})
}

// A task enqueued while every worker is idle is picked up without waiting
// for a poll interval: the enqueue's token wakes the worker.
func TestIdleWorkerWokenByEnqueue(t *testing.T) {
	t.Parallel()
	b := idleSetup(t, "1h")
	_, err := tasks.NewClient(b.rdb).Enqueue(b.ctx, tasks.Task{ID: "t1", Agent: "tool"})
	require.NoError(t, err)
	v := waitState(t, b.rdb, "t1", 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.GreaterOrEqual(t, b.waits(t, "token"), 1.0)
	require.Zero(t, b.waits(t, "bound"), "no wait ran out its hour")
	// Shutdown ends the idle wait at once (its bound is an hour).
	require.NoError(t, b.stop())
	require.GreaterOrEqual(t, b.waits(t, "stopped"), 1.0)
}

// A task scheduled for later is announced (rkeys.DueChannel), so the worker
// forwards it when due rather than at its next poll; and the retry a worker
// schedules itself is forwarded when due.
func TestIdleWorkerForwardsWhenDue(t *testing.T) {
	t.Parallel()
	b := idleSetup(t, "1h")
	c := tasks.NewClient(b.rdb)
	due := time.Now().Add(time.Second)
	_, err := c.Enqueue(b.ctx, tasks.Task{ID: "later", Agent: "tool"}, tasks.ProcessAt(due))
	require.NoError(t, err)
	_, err = c.Enqueue(b.ctx, tasks.Task{ID: "flaky", Agent: "tool", Action: "flaky"})
	require.NoError(t, err)
	for _, id := range []string{"later", "flaky"} {
		v := waitState(t, b.rdb, id, 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateSucceeded, v.State, id)
	}
	v, err := c.Store().Get(b.ctx, "flaky")
	require.NoError(t, err)
	require.Equal(t, 2, v.Attempts, "the retry ran")
	v, err = c.Store().Get(b.ctx, "later")
	require.NoError(t, err)
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventSucceeded, last.Event)
	require.False(t, last.At.Before(due), "asynq keeps whole seconds, but the task did not run before it was due")
	require.Zero(t, b.waits(t, "bound"), "no wait ran out its hour")
}

// A lost wake-up delays a task by at most the poll interval: a task put on
// the queue with no token (here by plain asynq, which pushes none) is found
// by the fleet's look (wake.Checks, every poll interval), which pushes a
// token for it, long before the idle worker's own wait (30 poll intervals)
// would end at its bound.
func TestLostWakeUpBound(t *testing.T) {
	t.Parallel()
	b := idleSetup(t, "300ms")
	before, tokens := b.waits(t, "bound"), b.waits(t, "token")
	env := &tasks.Envelope{ID: "silent", Agent: "tool", Queue: tasks.DefaultQueue, EnqueuedAt: time.Now().UTC()}
	payload, err := tasks.Encode(env)
	require.NoError(t, err)
	aq := asynq.NewClientFromRedisClient(b.rdb)
	_, err = aq.Enqueue(asynq.NewTask(tasks.TypeName, payload), asynq.TaskID(env.AsynqID()), asynq.MaxRetry(5))
	require.NoError(t, err)
	var atCall float64
	select {
	case atCall = <-b.boundAtCall:
	case <-time.After(30 * time.Second):
		t.Fatal("the task without a wake-up never ran")
	}
	require.Equal(t, before, atCall, "found by the fleet's look, not by a wait's bound")
	require.Greater(t, b.waits(t, "token"), tokens, "woken by the token the fleet's look pushed")
}
