package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// TestGoAgentSuspend (#37): a Go agent's Suspend ends its run waiting (no
// retry, no restart used); a signal resumes it, and the resumed run's
// Request carries Resume, Wait and Signals, and the steps recorded before
// the suspend. A wait the worker refuses (two kinds) fails the attempt
// logic_error, whose text starts "invalid suspend: ".
func TestGoAgentSuspend(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 1)
	goAgent := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		if _, err := req.Step(ctx, "plan", func(context.Context) (any, error) { return "p", nil }); err != nil {
			return nil, err
		}
		if req.Resume == 0 {
			return nil, agent.Suspend(agent.Wait{Signal: "approve", Timeout: time.Hour})
		}
		got <- req
		return json.RawMessage(`"done"`), nil
	})
	badAgent := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return nil, agent.Suspend(agent.Wait{Signal: "a", Sleep: time.Second})
	})
	_, rdb := runWorker(t, stepsYAML, WithAgent("go", goAgent), WithAgent("big", badAgent))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "susp", Agent: "go"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "bad", Agent: "big"})
	require.NoError(t, err)

	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := st.Get(ctx, "susp")
		if err == nil && v.State == tasks.StateWaiting {
			break
		}
		require.False(t, time.Now().After(deadline), "susp never waited")
		time.Sleep(10 * time.Millisecond)
	}
	res, err := c.Signal(ctx, "susp", "approve", json.RawMessage(`{"by":"ops"}`))
	require.NoError(t, err)
	require.True(t, res.Resumed)

	var req agent.Request
	select {
	case req = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed run never ran")
	}
	require.Equal(t, 1, req.Resume)
	require.Equal(t, 1, req.Attempt, "a resume uses no retry")
	require.Equal(t, &agent.WaitResult{Kind: agent.WaitSignal, Signal: "approve"}, req.Wait)
	require.Equal(t, map[string]json.RawMessage{"approve": json.RawMessage(`{"by":"ops"}`)}, req.Signals)
	require.Equal(t, json.RawMessage(`"p"`), req.Steps["plan"], "steps recorded before the suspend are kept")

	views := waitTerminal(t, rdb, []string{"susp", "bad"}, 20*time.Second)
	v := views["susp"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, 1, v.Resumes)
	require.Zero(t, v.Restarts)
	var kinds []string
	for _, ev := range v.History {
		kinds = append(kinds, ev.Event)
	}
	require.Subset(t, kinds, []string{record.EventWaiting, record.EventSignal, record.EventResumed, record.EventSucceeded})

	bad := views["bad"]
	require.Equal(t, tasks.StateDeadLettered, bad.State)
	require.Equal(t, "logic_error", bad.ErrorClass)
	require.Contains(t, bad.Error, "invalid suspend: ")
}
