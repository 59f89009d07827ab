package worker

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

const stepsYAML = `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 30s
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms, jitter: 0}
agents:
  go: {}
  big: {}
`

// TestGoAgentSteps (#37): a Go agent's steps (Request.Step) are recorded
// as it goes; its retry gets them in its Request and runs only the steps
// not recorded; the steps' usage is the task's. A step over a cap fails
// the attempt logic_error with a message naming the cap (dead-lettered:
// not retryable), recording nothing of it.
func TestGoAgentSteps(t *testing.T) {
	t.Parallel()
	var ran atomic.Int64 // step functions run, by bit: s1 1, s2 2, s3 4 (the first attempt) and 8, 16, 32 (the second)
	goAgent := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		var out []string
		for i, name := range []string{"s1", "s2", "s3"} {
			data, err := req.Step(ctx, name, func(context.Context) (any, error) {
				ran.Add(1 << (3*(req.Attempt-1) + i))
				return agent.StepResult{Data: name + " done", Usage: json.RawMessage(`{"total_tokens":10}`)}, nil
			})
			if err != nil {
				return nil, err
			}
			out = append(out, string(data))
			if req.Attempt == 1 && name == "s2" {
				return nil, &resilience.Failure{Err: context.DeadlineExceeded, Class: resilience.Timeout}
			}
		}
		return json.Marshal(out)
	})
	bigAgent := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		_, err := req.Step(ctx, "huge", func(context.Context) (any, error) {
			return strings.Repeat("x", record.MaxStepBytes), nil
		})
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`"should not succeed"`), nil
	})
	_, rdb := runWorker(t, stepsYAML, WithAgent("go", goAgent), WithAgent("big", bigAgent))
	c := tasks.NewClient(rdb)
	for _, task := range []tasks.Task{{ID: "go-steps", Agent: "go"}, {ID: "big-step", Agent: "big"}} {
		task.Params = json.RawMessage(`{}`)
		_, err := c.Enqueue(context.Background(), task)
		require.NoError(t, err)
	}
	views := waitTerminal(t, rdb, []string{"go-steps", "big-step"}, 30*time.Second)

	v := views["go-steps"]
	require.Equal(t, tasks.StateSucceeded, v.State, v.Error)
	require.Equal(t, 2, v.Attempts)
	require.JSONEq(t, `["\"s1 done\"","\"s2 done\"","\"s3 done\""]`, string(v.Result))
	require.Equal(t, int64(1|2|32), ran.Load(), "s1, s2 on the first attempt; only s3 on the retry")
	require.Equal(t, 3, v.Steps)
	require.NotNil(t, v.Usage)
	require.Equal(t, int64(30), v.Usage.TotalTokens)

	v = views["big-step"]
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, string(resilience.LogicError), v.ErrorClass)
	require.Contains(t, v.Error, "per step")
	require.Zero(t, v.Steps)
}

// TestStepOfCanceledTaskRefused (#37): a step recorded after its task was
// canceled is refused like every write of a run no longer live: Step
// returns the refusal, nothing of it is written, and the task stays
// canceled with the steps recorded before.
func TestStepOfCanceledTaskRefused(t *testing.T) {
	t.Parallel()
	recorded := make(chan struct{})
	refusal := make(chan error, 1)
	var store atomic.Pointer[tasks.Store]
	goAgent := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		if _, err := req.Step(ctx, "a", func(context.Context) (any, error) { return "a", nil }); err != nil {
			return nil, err
		}
		close(recorded)
		deadline := time.Now().Add(20 * time.Second)
		for { // the agent goes on, whatever its context says, until the task is canceled
			if v, err := store.Load().Get(context.Background(), req.TaskID); err == nil && v.State == tasks.StateCanceled {
				break
			}
			if time.Now().After(deadline) {
				return nil, context.DeadlineExceeded
			}
			time.Sleep(5 * time.Millisecond)
		}
		_, err := req.Step(context.WithoutCancel(ctx), "b", func(context.Context) (any, error) { return "b", nil })
		refusal <- err
		return nil, err
	})
	_, rdb := runWorker(t, stepsYAML, WithAgent("go", goAgent), WithAgent("big", goAgent))
	store.Store(tasks.NewStore(rdb))
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(context.Background(), tasks.Task{ID: "cancel-steps", Agent: "go", Params: json.RawMessage(`{}`)})
	require.NoError(t, err)
	select {
	case <-recorded:
	case <-time.After(20 * time.Second):
		t.Fatal("the first step was not recorded")
	}
	_, err = c.Cancel(context.Background(), "cancel-steps", "test")
	require.NoError(t, err)
	select {
	case err = <-refusal:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never tried its second step")
	}
	require.ErrorIs(t, err, record.ErrStepRefused)
	require.ErrorContains(t, err, "canceled")

	steps, err := record.NewStore(rdb).Steps(context.Background(), "cancel-steps")
	require.NoError(t, err)
	require.Equal(t, map[string]json.RawMessage{"a": json.RawMessage(`"a"`)}, steps)
	v := waitTerminal(t, rdb, []string{"cancel-steps"}, 20*time.Second)["cancel-steps"]
	require.Equal(t, tasks.StateCanceled, v.State)
	require.Equal(t, 1, v.Steps)
}
