package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/unmatched"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestClassifiedByAndWeakFailures (#38, "say how sure it is"): a Go agent
// failing with a text nothing decides for sure (default, or an unsure
// model: the test reads which from the classifier) is dead-lettered with
// that classified_by in its record, its history and its dead letter, lands in the
// unmatched stream and bumps agentq_classify_weak_total; a 429 (decided
// by its status) carries its own classified_by and writes nothing to the
// stream, nor does a success: the only XADD the whole run made is the
// weak failure's.
func TestClassifiedByAndWeakFailures(t *testing.T) {
	t.Parallel()
	weakErr := errors.New("zq-7 frobnicated the quux")
	v := resilience.Classifier{}.Classify(weakErr)
	require.True(t, v.Weak, "the test needs a text the classifier is unsure of; %q is decided by %s", weakErr, v.By)
	strongErr := &resilience.Failure{Status: 429, Text: "slow down"}
	require.False(t, resilience.Classifier{}.Classify(strongErr).Weak)

	var c calls
	w, rdb := runWorker(t, `
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 1}
  restart: {max_restarts: 0}
  circuit_breaker: {failure_threshold: 100}
`, WithAgent("weak", fixedAgent(&c, weakErr)), WithAgent("strong", fixedAgent(&c, strongErr)), WithAgent("ok", fixedAgent(&c, nil)))
	ctx := context.Background()
	cl := tasks.NewClient(rdb)
	for _, a := range []string{"weak", "strong", "ok"} {
		_, err := cl.Enqueue(ctx, tasks.Task{ID: a + "-task", Agent: a})
		require.NoError(t, err)
	}
	views := waitTerminal(t, rdb, []string{"weak-task", "strong-task", "ok-task"}, 30*time.Second)

	weak := views["weak-task"]
	require.Equal(t, tasks.StateDeadLettered, weak.State)
	require.Equal(t, string(v.Class), weak.ErrorClass)
	require.Equal(t, string(v.By), weak.ClassifiedBy)
	last := weak.History[len(weak.History)-1]
	require.Equal(t, tasks.EventDeadLettered, last.Event)
	require.Equal(t, string(v.By), last.ClassifiedBy)
	e, err := deadletter.NewStore(rdb).Get(ctx, "weak-task")
	require.NoError(t, err)
	require.Equal(t, string(v.By), e.ClassifiedBy)

	strong := views["strong-task"]
	require.Equal(t, string(resilience.RateLimited), strong.ErrorClass)
	require.Contains(t, []string{"status", "text", "structure"}, strong.ClassifiedBy)
	require.Equal(t, tasks.StateSucceeded, views["ok-task"].State)
	require.Empty(t, views["ok-task"].ClassifiedBy)

	got, err := unmatched.NewStore(rdb).List(ctx, unmatched.Query{})
	require.NoError(t, err)
	require.Len(t, got, 1, "only the weak failure is kept")
	require.Equal(t, unmatched.Entry{At: got[0].At, TaskID: "weak-task", Agent: "weak", Attempt: 1, ErrorClass: string(v.Class),
		ClassifiedBy: string(v.By), Status: 0, Error: weak.Error}, got[0])
	require.WithinDuration(t, time.Now(), got[0].At, time.Minute)

	require.InDelta(t, 1, counterValue(t, w, "agentq_classify_weak_total", map[string]string{"agent": "weak", "classified_by": string(v.By)}), 0)
	require.InDelta(t, 0, counterValue(t, w, "agentq_classify_weak_total", map[string]string{"agent": "strong"}), 0)
	require.InDelta(t, 0, counterValue(t, w, "agentq_classify_weak_total", map[string]string{"agent": "ok"}), 0)
	require.EqualValues(t, 1, xaddCalls(t, rdb), "a success and a strong failure write nothing to the stream")
}

// xaddCalls is how many XADDs the server ran (INFO commandstats).
func xaddCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	m := regexp.MustCompile(`cmdstat_xadd:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestWeakFailureStreamIsBestEffort: a worker whose Redis user may not
// XADD still records and dead-letters a weak failure (the stream write is
// logged, never fails the delivery) and still counts it.
func TestWeakFailureStreamIsBestEffort(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "noxadd", "on", ">pw", "~*", "&*", "+@all", "-xadd").Err())
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noxadd", Password: "pw"})
	t.Cleanup(func() { _ = limited.Close() })
	cfg, err := config.Parse([]byte(fmt.Sprintf("redis: {url: %q}\n%s", srv.URL(), `
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults: {timeout: 10s, retry: {max_attempts: 1}, restart: {max_restarts: 0}}
`)), "test.yaml")
	require.NoError(t, err)
	var c calls
	w, err := New(cfg, limited, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithAgent("weak", fixedAgent(&c, errors.New("zq-7 frobnicated the quux"))))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	_, err = tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "weak-task", Agent: "weak"})
	require.NoError(t, err)
	v := waitTerminal(t, rdb, []string{"weak-task"}, 30*time.Second)["weak-task"]
	require.Equal(t, tasks.StateDeadLettered, v.State)
	want := resilience.Classifier{}.Classify(errors.New("zq-7 frobnicated the quux"))
	require.True(t, want.Weak)
	require.Equal(t, string(want.By), v.ClassifiedBy)
	n, err := rdb.Exists(ctx, rkeys.ClassifyUnmatched()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the XADD was refused")
	require.InDelta(t, 1, counterValue(t, w, "agentq_classify_weak_total", map[string]string{"agent": "weak"}), 0)
}
