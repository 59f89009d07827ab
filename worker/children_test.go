package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// suspendForChildren makes task id (agent boss) wait for the children
// specs, as the delivery's suspend does, by hand: its run 0 scheduled out
// of the way, its run 1 scheduled an hour out, the wait stored for run 1,
// the record waiting at run 1, then the children spawned. (fanout_test.go
// suspends through a real agent's reply.)
func suspendForChildren(t *testing.T, rdb redis.UniversalClient, id, mode string, specs []tasks.ChildSpec) []string {
	t.Helper()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "boss"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	env := &tasks.Envelope{ID: id, Agent: "boss", Queue: tasks.DefaultQueue, Run: 1, EnqueuedAt: time.Now().UTC()}
	require.NoError(t, c.EnqueueRun(ctx, env, time.Hour))
	_, err = c.PrepareChildren(ctx, env, 1, mode, specs)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), record.FieldState, "waiting", record.FieldRun, 1).Err())
	ids, err := c.SpawnChildren(ctx, env, specs)
	require.NoError(t, err)
	return ids
}

// TestChildrenEndResumesParent: children run on a real worker; the last
// child's end (its success, its dead letter) resumes the waiting parent
// once: its next run is taken and its agent called once, with every
// child's end kept in spawn order.
func TestChildrenEndResumesParent(t *testing.T) {
	t.Parallel()
	var boss atomic.Int32
	_, rdb := runWorker(t, `
worker: {concurrency: 4, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
agents:
  boss: {}
  kid: {}
`, WithAgent("boss", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		boss.Add(1)
		return json.RawMessage(`"done"`), nil
	})), WithAgent("kid", agent.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if r.Action == "fail" {
			return nil, &resilience.Failure{Class: resilience.InvalidRequest, Text: "no"}
		}
		return json.RawMessage(`{"ok":true}`), nil
	})))
	ids := suspendForChildren(t, rdb, "P", record.ModeAll, []tasks.ChildSpec{{Agent: "kid"}, {Agent: "kid", Action: "fail"}, {Agent: "kid", Name: "c"}})
	require.Equal(t, []string{"P.1", "P.2", "P.c"}, ids)
	v := waitState(t, rdb, "P", 30*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })
	require.Equal(t, ids, v.Children)
	require.Equal(t, int32(1), boss.Load())
	ends, err := record.NewStore(rdb).ChildEnds(context.Background(), "P")
	require.NoError(t, err)
	require.Len(t, ends, 3)
	require.Equal(t, tasks.StateSucceeded, ends[0].State)
	require.JSONEq(t, `{"ok":true}`, string(ends[0].Result))
	require.Equal(t, tasks.StateDeadLettered, ends[1].State)
	require.NotEmpty(t, ends[1].ErrorClass)
	require.Equal(t, "c", ends[2].Name)
}

// TestCancelParentStopsChildren: a parent whose children run (real exec
// agents that block) is canceled: every child ends canceled and its
// agent's processes are stopped.
func TestCancelParentStopsChildren(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 2s}
defaults:
  timeout: 1m
agents:
  boss: {}
  sleeper:
    exec: {command: [sh, -c, 'sleep 120 & echo $$ $! >> %s; wait'], env: [PATH]}
`, pidFile), WithAgent("boss", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return nil, nil
	})))
	ids := suspendForChildren(t, rdb, "Q", record.ModeAll, []tasks.ChildSpec{{Agent: "sleeper"}, {Agent: "sleeper"}})
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
		return len(pids) == 4
	}, 20*time.Second, 10*time.Millisecond, "the children never started")
	for _, id := range ids {
		waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateActive })
	}

	res, err := tasks.NewClient(rdb).Cancel(context.Background(), "Q", "stop the tree")
	require.NoError(t, err)
	require.Equal(t, 2, res.Children)
	for _, id := range ids {
		v := waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateCanceled, v.State, id)
	}
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if !deadlineGone(pid) {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "a child's agent survived the cancel: %v", pids)
}

// TestTreeBudget: a child's usage debits its root's cap: once the tree
// (the root's own usage and its descendants') reached the root's
// max_tokens, a child is dead-lettered budget_exhausted before its call,
// and so is the root's own next attempt.
func TestTreeBudget(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
agents:
  llm: {}
`, WithAgent("llm", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(`{"usage":{"prompt_tokens":600,"completion_tokens":0,"total_tokens":600}}`), nil
	})))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(ctx, tasks.Task{ID: "root", Agent: "llm", MaxTokens: 1000}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	root := &tasks.Envelope{ID: "root", Agent: "llm", Queue: tasks.DefaultQueue, MaxTokens: 1000}
	_, err = c.SpawnChildren(ctx, root, []tasks.ChildSpec{{Agent: "llm", ID: "first"}})
	require.NoError(t, err)
	v := waitState(t, rdb, "first", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State, "600 of the tree's 1000")
	_, err = c.SpawnChildren(ctx, root, []tasks.ChildSpec{{Agent: "llm", ID: "second"}})
	require.NoError(t, err)
	v = waitState(t, rdb, "second", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State, "1200 now: over")
	_, err = c.SpawnChildren(ctx, root, []tasks.ChildSpec{{Agent: "llm", ID: "third", MaxTokens: 5000}})
	require.NoError(t, err)
	v = waitState(t, rdb, "third", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, ReasonBudgetExhausted, v.Reason)
	require.Contains(t, v.Error, "the cap of its tree (root root) was reached: max_tokens 1000 (used 1200)")
	require.EqualValues(t, 2, calls.Load(), "the third child's call was not made")

	ok, err := c.ResumeRun(ctx, "root", tasks.DefaultQueue, 0)
	require.NoError(t, err)
	require.True(t, ok)
	v = waitState(t, rdb, "root", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Contains(t, v.Error, "the task's own cap was reached: max_tokens 1000 (used 1200)", "a root's cap covers its tree")
	require.EqualValues(t, 2, calls.Load())
}
