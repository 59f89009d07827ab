package worker

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/charts"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// scriptCalls is how many scripts Redis has run (EVALSHA and EVAL).
func scriptCalls(t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(s, -1) {
		c, _ := strconv.Atoi(m[1])
		n += c
	}
	return n
}

var quickAgent = agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true}`), nil
})

// TestSuccessRidesAsynqsAck: a quick task's success is recorded in the
// script asynq acknowledges it with, and that script also hands out the
// queue's next run (complete-and-fetch-next, internal/broker's
// prefetch.go), so the worker runs about one script per task where plain
// asynq runs two (a dequeue and a done), and every record ends succeeded
// with its attempt counted once.
func TestSuccessRidesAsynqsAck(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	const n = 100
	ids := enqueueN(t, rdb, "tool", n)
	before := scriptCalls(t, rdb)
	start := time.Now()

	w := newTestWorker(t, srv, "", startYAML, WithAgent("tool", quickAgent))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, id := range ids {
		v := waitState(t, rdb, id, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateSucceeded, v.State)
		require.Equal(t, 1, v.Attempts)
		require.Equal(t, []string{"succeeded@tool"}, eventsOf(v))
	}
	calls := scriptCalls(t, rdb) - before
	elapsed := time.Since(start)
	cancel()
	require.NoError(t, <-done)
	// Each task: its done carrying the record write and the next run's
	// dequeue; the processor's own dequeues only for the first runs and
	// for the empty rounds when the queue runs dry. The slack covers the scripts that run by the clock, not per task (the
	// forwarder's checks once per poll interval, the breaker's success
	// flush once a second): a few per second of the run, which on a busy
	// machine lasts longer, and the fleet gauges' tick at start and every
	// GaugesInterval (its lease's claim, and inspect.Queues' scripts for
	// the one queue). A record write of its own would add n, and so would
	// a dequeue of its own.
	const gaugesTick = 5
	background := 3*int(elapsed/time.Second+1) + gaugesTick*int(1+elapsed/GaugesInterval)
	require.GreaterOrEqual(t, calls, n)
	require.LessOrEqual(t, calls, n+n/2+background, "scripts per task: %.2f in %v", float64(calls)/n, elapsed)
	require.Zero(t, w.acks.Len(), "no write is left waiting for an ack")
}

// TestHandlerOnOwnServerRecords: the pipeline embedded in an asynq server
// of the caller's own (Worker.Handler) records successes itself, since
// that server's acks are not the worker's to ride.
func TestHandlerOnOwnServerRecords(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	w := newTestWorker(t, srv, "", startYAML, WithAgent("tool", quickAgent))
	own := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 2, LogLevel: asynq.FatalLevel})
	require.NoError(t, own.Start(w.Handler()))
	t.Cleanup(own.Shutdown)
	for _, id := range enqueueN(t, rdb, "tool", 3) {
		v := waitState(t, rdb, id, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateSucceeded, v.State)
	}
}

// TestAttemptsCountedForCharts: a worker counts its attempts per minute for
// the console's charts (internal/charts) and adds them to Redis in batches:
// after Run returns (its last flush), every success is counted once.
// TestSuccessRidesAsynqsAck bounds the scripts per task with this counter
// running: it adds none per task.
func TestAttemptsCountedForCharts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	const n = 50
	ids := enqueueN(t, rdb, "tool", n)
	start := time.Now()
	w := newTestWorker(t, srv, "", startYAML, WithAgent("tool", quickAgent))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, id := range ids {
		waitState(t, rdb, id, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	}
	cancel()
	require.NoError(t, <-done)
	minutes, err := charts.Read(context.Background(), rdb, start, time.Now())
	require.NoError(t, err)
	ok, failed := 0, 0
	for _, m := range minutes {
		ok += m.Succeeded
		failed += m.Failed
	}
	require.Equal(t, n, ok)
	require.Zero(t, failed)
}
