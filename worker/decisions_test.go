package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestPipelineDecisions: each decision of the pipeline (succeed, retry,
// restart, dead letter with its reason) for one Go agent per case, on a
// real redis-server and without subprocesses, so that a decision is
// tested in milliseconds. The e2e suite covers the whole path.
func TestPipelineDecisions(t *testing.T) {
	t.Parallel()
	type step struct {
		err  error
		data string
	}
	cases := []struct {
		name    string
		steps   []step // the agent's answer to each call, in order
		state   tasks.State
		events  []string
		class   resilience.Class
		reason  string // the dead letter's reason
		attempt int
	}{
		{name: "success", steps: []step{{data: `{"ok":1}`}}, state: tasks.StateSucceeded,
			events: []string{"succeeded"}, attempt: 1},
		{name: "retry then success", steps: []step{{err: &resilience.Failure{Status: 503, Text: "overloaded"}}, {data: `{}`}},
			state: tasks.StateSucceeded, events: []string{"retrying", "succeeded"}, attempt: 2},
		{name: "not retryable", steps: []step{{err: &resilience.Failure{Status: 400, Text: "bad request: missing field"}}},
			state: tasks.StateDeadLettered, events: []string{"dead_lettered"}, class: resilience.InvalidRequest,
			reason: ReasonNotRetryable, attempt: 1},
		{name: "attempts used up, no restarts", steps: []step{{err: errors.New("boom")}, {err: errors.New("boom")}},
			state: tasks.StateDeadLettered, events: []string{"retrying", "dead_lettered"}, class: resilience.ProviderError,
			reason: "restart_not_enabled", attempt: 2},
		{name: "logic error", steps: []step{{err: &resilience.Failure{Class: resilience.LogicError, Text: "agent output is not an ActionResponse"}}},
			state: tasks.StateDeadLettered, events: []string{"dead_lettered"}, class: resilience.LogicError,
			reason: ReasonNotRetryable, attempt: 1},
	}
	yaml := "worker: {concurrency: 4, shutdown_timeout: 2s}\n" +
		"defaults:\n  retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms}\n  restart: {max_restarts: 0}\n" +
		"  circuit_breaker: {failure_threshold: 100}\nagents:\n"
	var opts []Option
	for i, tc := range cases {
		name := fmt.Sprintf("a%d", i)
		yaml += "  " + name + ": {}\n"
		calls := 0
		steps := tc.steps
		opts = append(opts, WithAgent(name, agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
			s := steps[min(calls, len(steps)-1)]
			calls++
			return json.RawMessage(s.data), s.err
		})))
	}
	_, rdb := runWorker(t, yaml, opts...)
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	for i := range cases {
		_, err := c.Enqueue(ctx, tasks.Task{ID: fmt.Sprintf("t%d", i), Agent: fmt.Sprintf("a%d", i)})
		require.NoError(t, err)
	}
	dlq := deadletter.NewStore(rdb)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("t%d", i)
			v := waitState(t, rdb, id, 10*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
			require.Equal(t, tc.state, v.State)
			var got []string
			for _, ev := range v.History[1:] {
				got = append(got, ev.Event)
			}
			require.Equal(t, tc.events, got)
			require.Equal(t, string(tc.class), v.ErrorClass)
			require.Equal(t, tc.attempt, v.Attempts)
			e, err := dlq.Get(ctx, id)
			if tc.reason == "" {
				require.ErrorIs(t, err, deadletter.ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.reason, e.Reason)
			last := e.History[len(e.History)-1]
			require.Equal(t, tasks.EventDeadLettered, last.Event)
			require.Equal(t, v.History[len(v.History)-1].Seq, last.Seq, "the dead letter's copy of its event has the record's seq")
			require.Equal(t, tc.attempt, e.Attempts)
		})
	}
}
