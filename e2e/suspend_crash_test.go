package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestSuspendCrashBeforeWaitingRecorded: a worker (real process) dies
// (failpoint before_waiting_recorded) after scheduling a suspended run's
// resume (run 1, scheduled for the wait's 1h timeout) and before recording
// the suspend. asynq's lease recovery redelivers run 0 to a second worker,
// which finds run 1 scheduled and records the suspend the dead worker did
// not: the task reads waiting (not restarting), its history has the waiting
// event (no restart), and a signal resumes it at once with its payload; it
// succeeds exactly once.
func TestSuspendCrashBeforeWaitingRecorded(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 5s}
defaults:
  timeout: 1m
  retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 50ms, jitter: 0}
agents:
  waiter: {exec: {command: [%q]}}
`, b.agent))

	w1 := startEnv(t, "worker-1", []string{"AGENTQ_FAILPOINT=before_waiting_recorded"}, b.worker, "--config", cfg, "--redis", srv.URL())
	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "waiter", "--id", "cw",
		"--params", `{"mode":"suspend","wait":{"signal":"approve","timeout":"1h"}}`)
	require.Equal(t, 0, code, errOut)
	select {
	case <-w1.done:
	case <-time.After(60 * time.Second):
		t.Fatal("worker 1 did not hit the failpoint before_waiting_recorded")
	}
	var ee *exec.ExitError
	require.True(t, errors.As(w1.err, &ee), "worker 1 exit: %v", w1.err)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker 1 died of %v", w1.err)

	st := tasks.NewStore(rdb)
	v, err := st.Get(ctx, "cw")
	require.NoError(t, err)
	require.Equal(t, 0, v.Run, "the suspend was not recorded")
	_, err = asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(tasks.DefaultQueue, "cw#1")
	require.NoError(t, err, "the resume (run 1) is scheduled")

	expireLease(t, rdb, "cw")
	w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	poll(t, 60*time.Second, "cw waiting at run 1", func() bool {
		v, err = st.Get(ctx, "cw")
		return err == nil && v.State == tasks.StateWaiting && v.Run == 1
	})
	require.Zero(t, v.Restarts, "a resume uses no restart")
	require.Equal(t, 1, v.Resumes)
	var wait map[string]any
	require.NoError(t, json.Unmarshal(v.Wait, &wait), string(v.Wait))
	require.Equal(t, "approve", wait["signal"], "the wait is kept")
	require.NotContains(t, eventNames(v.History), tasks.EventRestarting)
	require.Contains(t, string(eventOf(t, v, tasks.EventWaiting).Wait), `"signal":"approve"`)

	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "task", "signal", "cw", "approve", "--data", `{"ok":true}`, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"resumed":true`, "the signal resumes the recovered wait at once")

	v = waitStates(t, rdb, []string{"cw"}, 60*time.Second)["cw"]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	var r suspendResult
	require.NoError(t, json.Unmarshal(v.Result, &r), string(v.Result))
	require.Equal(t, 1, r.Resume)
	require.JSONEq(t, `{"ok":true}`, string(r.Signals["approve"]))
	require.Equal(t, "signal", eventOf(t, v, tasks.EventResumed).By)
	names := eventNames(v.History)
	require.NotContains(t, names, tasks.EventRestarting)
	succeeded := 0
	for _, n := range names {
		if n == tasks.EventSucceeded {
			succeeded++
		}
	}
	require.Equal(t, 1, succeeded, "succeeded exactly once: %v", names)
	log, _ := os.ReadFile(w2.log)
	require.Contains(t, string(log), "dropping a redelivered run whose next run (a restart or a resume) was already scheduled")
	require.Equal(t, 0, w2.stop(t, 15*time.Second))
}
