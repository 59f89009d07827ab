package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// suspendResult is what the test agent's "suspend" mode answers on its
// resumed run.
type suspendResult struct {
	Resume int `json:"resume"`
	Wait   struct {
		Kind     string `json:"kind"`
		Signal   string `json:"signal"`
		TimedOut bool   `json:"timed_out"`
	} `json:"wait"`
	Signals map[string]json.RawMessage `json:"signals"`
}

// eventOf is the first event of kind in v's history (it must be there).
func eventOf(t *testing.T, v *tasks.View, kind string) tasks.Event {
	t.Helper()
	for _, ev := range v.History {
		if ev.Event == kind {
			return ev
		}
	}
	t.Fatalf("no %s event in the history of %s", kind, v.ID)
	return tasks.Event{}
}

// TestSuspendEndToEnd (#37): real worker processes (concurrency 1) run an
// exec agent that suspends its run and succeeds once resumed:
//   - a signal wait: the task is waiting, the worker runs another task
//     meanwhile, `inspector task signal` resumes it with the payload in
//     its signals, and it succeeds (resumed by signal);
//   - a signal wait with a 1s timeout and no signal resumes timed out;
//   - a 1s sleep resumes after the sleep (by timer);
//   - a signal sent before the wait is kept: the wait resumes at once;
//   - a waiting task canceled ends canceled, its scheduled run gone.
func TestSuspendEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 5s}
defaults:
  timeout: 1m
  retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 50ms, jitter: 0}
agents:
  waiter: {exec: {command: [%q]}}
`, b.agent))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	rdb := srv.Client()
	ctx := context.Background()
	enqueue := func(id, params string) {
		t.Helper()
		_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "waiter", "--id", id, "--params", params)
		require.Equal(t, 0, code, errOut)
	}
	waiting := func(id string) {
		t.Helper()
		poll(t, 60*time.Second, id+" waiting", func() bool {
			v, err := tasks.NewStore(rdb).Get(ctx, id)
			return err == nil && v.State == tasks.StateWaiting
		})
	}
	result := func(v *tasks.View) suspendResult {
		t.Helper()
		require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
		var r suspendResult
		require.NoError(t, json.Unmarshal(v.Result, &r), string(v.Result))
		return r
	}

	// (d) first: its signal is sent before the task runs.
	client := tasks.NewClient(rdb)
	_, err := client.Enqueue(ctx, tasks.Task{ID: "early", Agent: "waiter",
		Params: json.RawMessage(`{"mode":"suspend","wait":{"signal":"go","timeout":"1h"}}`)}, tasks.ProcessIn(3*time.Second))
	require.NoError(t, err)
	res, err := client.Signal(ctx, "early", "go", json.RawMessage(`"now"`))
	require.NoError(t, err)
	require.False(t, res.Resumed)

	enqueue("sig", `{"mode":"suspend","wait":{"signal":"approve","timeout":"1h"}}`)
	enqueue("timeout", `{"mode":"suspend","wait":{"signal":"never","timeout":"1s"}}`)
	enqueue("sleep", `{"mode":"suspend","wait":{"sleep":"1s"}}`)
	enqueue("cancel", `{"mode":"suspend","wait":{"sleep":"1h"}}`)
	waiting("sig")
	waiting("cancel")

	// (a) While sig waits, the one worker slot runs another task.
	enqueue("other", `{"mode":"echo"}`)
	require.Equal(t, tasks.StateSucceeded, waitStates(t, rdb, []string{"other"}, 60*time.Second)["other"].State)
	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "signal", "sig", "approve", "--data", `{"ok":true}`, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"resumed":true`)

	views := waitStates(t, rdb, []string{"sig", "timeout", "sleep", "early"}, 90*time.Second)

	r := result(views["sig"])
	require.Equal(t, 1, r.Resume)
	require.Equal(t, "signal", r.Wait.Kind)
	require.Equal(t, "approve", r.Wait.Signal)
	require.False(t, r.Wait.TimedOut)
	require.JSONEq(t, `{"ok":true}`, string(r.Signals["approve"]))
	require.Equal(t, "signal", eventOf(t, views["sig"], tasks.EventResumed).By)
	require.Equal(t, "approve", eventOf(t, views["sig"], tasks.EventSignal).Name)
	require.Equal(t, 1, views["sig"].Resumes)
	require.Zero(t, views["sig"].Restarts, "a resume uses no restart")

	r = result(views["timeout"])
	require.True(t, r.Wait.TimedOut)
	require.Equal(t, "timeout", eventOf(t, views["timeout"], tasks.EventResumed).By)
	var w map[string]any
	require.NoError(t, json.Unmarshal(views["timeout"].Wait, &w))
	require.Equal(t, true, w["timed_out"])

	r = result(views["sleep"])
	require.Equal(t, "sleep", r.Wait.Kind)
	slept := eventOf(t, views["sleep"], tasks.EventResumed).At.Sub(eventOf(t, views["sleep"], tasks.EventWaiting).At)
	require.GreaterOrEqual(t, slept, 900*time.Millisecond, "resumed after its sleep")
	require.Equal(t, "timer", eventOf(t, views["sleep"], tasks.EventResumed).By)

	r = result(views["early"])
	require.Equal(t, "signal", r.Wait.Kind)
	require.False(t, r.Wait.TimedOut)
	require.JSONEq(t, `"now"`, string(r.Signals["go"]))
	require.Less(t, eventOf(t, views["early"], tasks.EventSignal).Seq, eventOf(t, views["early"], tasks.EventWaiting).Seq,
		"the signal came before the wait, and was kept")
	require.Equal(t, "signal", eventOf(t, views["early"], tasks.EventResumed).By)

	// (e) Cancel of a waiting task: canceled, its scheduled run gone.
	out, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "cancel", "cancel", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"previous_state":"waiting"`)
	require.Contains(t, out, `"removed":true`)
	_, err = rdb.ZScore(ctx, "asynq:{default}:scheduled", "cancel#1").Result()
	require.ErrorIs(t, err, redis.Nil, "the resumed run is gone")
	require.Equal(t, tasks.StateCanceled, waitStates(t, rdb, []string{"cancel"}, 10*time.Second)["cancel"].State)
}
