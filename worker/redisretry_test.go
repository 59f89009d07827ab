package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
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

// replyErr is a Redis error reply (it satisfies redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// readOnlyHook signals once a command naming key fails with READONLY.
type readOnlyHook struct {
	key  string
	hit  chan struct{}
	once atomic.Bool
}

func (h *readOnlyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *readOnlyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(cmd.Args(), err)
		return err
	}
}

func (h *readOnlyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.check(c.Args(), c.Err())
		}
		return err
	}
}

func (h *readOnlyHook) check(args []any, err error) {
	if !redis.IsReadOnlyError(err) {
		return
	}
	for _, a := range args {
		if s, ok := a.(string); ok && s == h.key && h.once.CompareAndSwap(false, true) {
			close(h.hit)
			return
		}
	}
}

// TestSuccessWriteWaitsOutReadOnly (issue #11, item 14): the agent
// succeeds, and the moment it returns the worker's Redis turns into a
// read-only replica (REPLICAOF a dead address: it keeps its data, refuses
// writes with READONLY), as in a failover. The worker must wait for Redis
// (untilRedis) and record "succeeded" once it is writable again (REPLICAOF
// NO ONE), not log the failed write and let asynq acknowledge a task whose
// record never saw its outcome.
func TestSuccessWriteWaitsOutReadOnly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client()
	hook := &readOnlyHook{key: rkeys.Task("t"), hit: make(chan struct{})}
	rdb := srv.Client()
	rdb.AddHook(hook)
	cfg, err := config.Parse([]byte(fmt.Sprintf("redis: {url: %q}\n%s", srv.URL(), startYAML)), "test.yaml")
	require.NoError(t, err)
	dead := func() []any {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		host, port, _ := net.SplitHostPort(l.Addr().String())
		require.NoError(t, l.Close())
		return []any{"REPLICAOF", host, port}
	}()
	var calls atomic.Int32
	w, err := New(cfg, rdb, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithAgent("tool", agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
			calls.Add(1)
			if err := admin.Do(context.WithoutCancel(ctx), dead...).Err(); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"ok":true}`), nil
		})))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		_ = admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err()
		cancel()
		require.NoError(t, <-done)
	})

	_, err = tasks.NewClient(admin).Enqueue(context.Background(), tasks.Task{ID: "t", Agent: "tool"})
	require.NoError(t, err)
	select {
	case <-hook.hit:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker never tried to write the task record to the read-only Redis")
	}
	role, err := admin.Do(context.Background(), "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "slave", role[0], "Redis is still read-only when the success write fails")
	require.NoError(t, admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err())

	v := waitState(t, admin, "t", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Attempts)
	require.Equal(t, []string{"succeeded@tool"}, eventsOf(v))
	require.JSONEq(t, `{"ok":true}`, string(v.Result))
	require.EqualValues(t, 1, calls.Load(), "the agent ran once")

	// asynq's acknowledgement lands too: the task leaves the active set.
	insp := asynq.NewInspectorFromRedisClient(admin)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, "t")
		if errors.Is(err, asynq.ErrTaskNotFound) || (err == nil && info.State == asynq.TaskStateCompleted) {
			break
		}
		require.True(t, time.Now().Before(deadline), "task not acknowledged: %+v %v", info, err)
		time.Sleep(10 * time.Millisecond)
	}
}
