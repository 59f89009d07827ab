package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// pidGone reports whether pid no longer runs (absent, or a zombie).
func pidGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// effectLines returns the lines of the test agent's effects log that
// belong to task id ("<task_id> <attempt> <restart> <pid> <mode>").
func effectLines(t *testing.T, file, id string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == id {
			out = append(out, f)
		}
	}
	return out
}

// inspectorTask runs `inspector task ID --json`.
func inspectorTask(t *testing.T, b bins, redisURL, id string) tasks.View {
	t.Helper()
	out, errOut, code := run(t, "", b.inspector, "--redis", redisURL, "task", id, "--json")
	require.Equal(t, 0, code, errOut)
	var v tasks.View
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// requireCanceled checks that task id is canceled with reason and that
// nothing was recorded after its cancel.
func requireCanceled(t *testing.T, b bins, redisURL, id, reason string) {
	t.Helper()
	v := inspectorTask(t, b, redisURL, id)
	require.Equal(t, tasks.StateCanceled, v.State, "%s: %v", id, eventNames(v.History))
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventTaskCanceled, last.Event, "%s: nothing follows the cancel: %v", id, eventNames(v.History))
	require.Equal(t, reason, last.Reason)
	require.Contains(t, last.Error, reason)
	require.Empty(t, eventsOf(v.History, tasks.EventDeadLettered), id)
}

// TestCancelRunningExecAgent: `inspector task cancel` of a task whose exec
// agent runs with a child process (both ignoring SIGTERM): both PIDs are
// gone within 2 s of the cancel, the task is canceled with its reason,
// and its run never reappears — not in asynq, not in the agent's effects
// log, not after the worker is restarted.
func TestCancelRunningExecAgent(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	dir := t.TempDir()
	pidFile, effects := filepath.Join(dir, "pids"), filepath.Join(dir, "effects")
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 5m
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 100ms}
  restart: {max_restarts: 3, delays: [1s]}
agents:
  tool:
    exec: {command: [%q]}
`, b.agent))
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	termFile := filepath.Join(dir, "terms")
	params := fmt.Sprintf(`{"mode":"hang","children":1,"ignore_term":true,"term_file":%q,"pid_file":%q,"effects":%q}`, termFile, pidFile, effects)
	out, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--action", "run", "--id", "runaway", "--params", params)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "runaway", strings.TrimSpace(out))

	var pids []int
	poll(t, 30*time.Second, "the agent and its child to start", func() bool {
		lines := effectLines(t, effects, "runaway")
		kids, err := os.ReadFile(pidFile)
		if len(lines) != 1 || err != nil {
			return false
		}
		leader, _ := strconv.Atoi(lines[0][3])
		child, _ := strconv.Atoi(strings.TrimSpace(string(kids)))
		pids = []int{leader, child}
		return true
	})

	// The quick stop is SIGKILL QuickStopGrace (500 ms) after the agent's
	// SIGTERM, where a shutdown gives it kill_grace (2 s): measured from
	// the SIGTERM the agent noted (term_file) to both PIDs gone, so that
	// the cancel's own way to the worker (the inspector's start, asynq's
	// cancel message), seconds on a loaded machine, is not counted.
	goneAt := make(chan time.Time, 1)
	go func() {
		for !pidGone(pids[0]) || !pidGone(pids[1]) {
			time.Sleep(5 * time.Millisecond)
		}
		goneAt <- time.Now()
	}()
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "task", "cancel", "runaway", "--reason", "runaway agent")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "runaway")
	require.Contains(t, out, "canceled")
	select {
	case at := <-goneAt:
		raw, err := os.ReadFile(termFile)
		require.NoError(t, err, "the agent noted no SIGTERM")
		first := strings.SplitN(strings.TrimSpace(string(raw)), "\n", 2)[0]
		ns, err := strconv.ParseInt(first, 10, 64)
		require.NoError(t, err, "term_file line %q", first)
		took := at.Sub(time.Unix(0, ns))
		t.Logf("agent and child gone %s after the agent's SIGTERM", took.Round(time.Millisecond))
		require.Less(t, took, 1500*time.Millisecond, "agent %d / child %d outlived their SIGTERM by 1.5s: not the quick stop", pids[0], pids[1])
	case <-time.After(30 * time.Second):
		t.Fatalf("agent %d / child %d still alive 30s after the cancel (gone: %v, %v)", pids[0], pids[1], pidGone(pids[0]), pidGone(pids[1]))
	}
	requireCanceled(t, b, srv.URL(), "runaway", "runaway agent")

	// The run never reappears: asynq lets go of it, the agent is not called
	// again, not after a worker restart either.
	insp := asynq.NewInspectorFromRedisClient(srv.Client())
	poll(t, 10*time.Second, "asynq to let go of the canceled run", func() bool {
		_, err := insp.GetTaskInfo(tasks.DefaultQueue, "runaway")
		return err != nil
	})
	require.Equal(t, 0, w.stop(t, 15*time.Second))
	start(t, "worker2", b.worker, "--config", cfg, "--redis", srv.URL())
	time.Sleep(2500 * time.Millisecond) // past the retry and restart delays
	require.Len(t, effectLines(t, effects, "runaway"), 1, "the canceled task ran again")
	requireCanceled(t, b, srv.URL(), "runaway", "runaway agent")
	for _, id := range []string{"runaway", "runaway#1"} {
		_, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		require.ErrorIs(t, err, asynq.ErrTaskNotFound, id)
	}

	// Cancel of an ended task, or of an unknown one: exit 1, saying why.
	_, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "task", "cancel", "runaway")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "state canceled")
	_, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "task", "cancel", "nobody")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nobody")
}

// TestCancelWaitingTasks: a scheduled task (cancelled through the HTTP
// API) and a task waiting in the restart queue (through the inspector)
// are taken off their queues and never call their agent again.
//
// Both wait an hour, so no machine is too slow to cancel them while they
// wait; instead of sleeping past their due times, the test then makes
// everything asynq still holds scheduled due at once: nothing may be left
// to run.
func TestCancelWaitingTasks(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	effects := filepath.Join(t.TempDir(), "effects")
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 1}
  restart: {max_restarts: 3, delays: [1h]}
agents:
  tool:
    exec: {command: [%q]}
`, b.agent))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	addr := freeAddr(t)
	start(t, "serve", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	waitHTTP(t, "http://"+addr+"/healthz", 30*time.Second)

	// Fails with a connection reset (network_transient): restarted in 1h.
	flaky := fmt.Sprintf(`{"mode":"fail_then_succeed","times":100,"state_dir":%q,"effects":%q}`, t.TempDir(), effects)
	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--id", "restarting", "--params", flaky)
	require.Equal(t, 0, code, errOut)
	echo := fmt.Sprintf(`{"mode":"echo","effects":%q}`, effects)
	_, errOut, code = run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--id", "later", "--in", "1h", "--params", echo)
	require.Equal(t, 0, code, errOut)

	st := tasks.NewStore(srv.Client())
	poll(t, 60*time.Second, "the first run to fail and wait for its restart", func() bool {
		v, err := st.Get(context.Background(), "restarting")
		return err == nil && v.State == tasks.StateRestarting
	})
	require.Len(t, inspectorRestarts(t, b, srv.URL()), 1, "the restart waits in the restart queue")

	out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "task", "cancel", "restarting", "--reason", "gave up", "--json")
	require.Equal(t, 0, code, errOut)
	var res tasks.CancelResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, tasks.StateRestarting, res.PreviousState)
	require.True(t, res.Removed)

	resp, err := http.Post("http://"+addr+"/api/v1/tasks/later/cancel", "application/json", strings.NewReader(`{"reason":"user left"}`))
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "scheduled", body["previous_state"])

	// Again: 409 naming the state.
	resp, err = http.Post("http://"+addr+"/api/v1/tasks/later/cancel", "application/json", nil)
	require.NoError(t, err)
	body = nil
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Equal(t, "task_ended", body["code"])
	require.Equal(t, "canceled", body["state"])

	// Their due times, now: asynq holds nothing scheduled any more (a run
	// left behind would be moved to pending and picked up by the worker).
	insp := asynq.NewInspectorFromRedisClient(srv.Client())
	moved, err := insp.RunAllScheduledTasks(tasks.DefaultQueue)
	require.NoError(t, err)
	require.Zero(t, moved, "a canceled task was still scheduled")
	poll(t, 60*time.Second, "the queue to be empty", func() bool {
		qi, err := insp.GetQueueInfo(tasks.DefaultQueue)
		require.NoError(t, err)
		return qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0
	})
	require.Len(t, effectLines(t, effects, "restarting"), 1, "the restart never ran")
	require.Empty(t, effectLines(t, effects, "later"), "the scheduled task never ran")
	requireCanceled(t, b, srv.URL(), "restarting", "gave up")
	requireCanceled(t, b, srv.URL(), "later", "user left")
	require.Empty(t, inspectorRestarts(t, b, srv.URL()), "the restart queue is empty")
}
