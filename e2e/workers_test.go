package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/redistest"
)

// TestInspectorWorkersShowsAKilledWorkerGone (#30 Workers): three worker
// processes run six exec tasks that never end; `inspector workers --json`
// lists the three alive with the six tasks in flight. One worker is
// SIGKILLed: within 30 s the inspector lists it gone, with exactly its
// tasks orphaned and when asynq's lease recovery brings them back, while
// the other two stay alive.
func TestInspectorWorkersShowsAKilledWorkerGone(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 10m
agents:
  tool:
    exec: {command: [%q]}
`, b.agent))
	procs := map[int]*proc{}
	for i := range 3 {
		p := start(t, fmt.Sprintf("worker-%d", i+1), b.worker, "--config", cfg, "--redis", srv.URL())
		procs[p.cmd.Process.Pid] = p
	}
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("forever-%d", i)
		ids = append(ids, id)
		_, errOut, code := run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "tool", "--id", id, "--params", `{"mode":"sleep","ms":-1}`)
		require.Equal(t, 0, code, errOut)
	}

	list := func() []inspect.WorkerInfo {
		t.Helper()
		out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "workers", "--json")
		require.Equal(t, 0, code, errOut)
		var ws []inspect.WorkerInfo
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			var w inspect.WorkerInfo
			require.NoError(t, json.Unmarshal([]byte(line), &w), line)
			ws = append(ws, w)
		}
		return ws
	}
	taskIDs := func(w inspect.WorkerInfo) []string {
		var out []string
		for _, task := range w.Tasks {
			out = append(out, task.ID)
		}
		sort.Strings(out)
		return out
	}

	// Three alive, the six tasks in flight among them (a task shows from
	// its worker's next heartbeat on).
	var ws []inspect.WorkerInfo
	poll(t, 60*time.Second, "3 alive workers running the 6 tasks", func() bool {
		ws = list()
		var running []string
		for _, w := range ws {
			if w.State != inspect.WorkerAlive {
				return false
			}
			running = append(running, taskIDs(w)...)
		}
		sort.Strings(running)
		return len(ws) == 3 && slices.Equal(running, ids)
	})
	var victim inspect.WorkerInfo
	for _, w := range ws {
		require.Contains(t, procs, w.PID, "the registry names the worker processes")
		require.Equal(t, 2, w.Concurrency)
		require.Equal(t, map[string]int{"default": 1}, w.Queues)
		for _, task := range w.Tasks {
			require.Equal(t, "tool", task.Agent)
			require.Equal(t, "default", task.Queue)
		}
		if len(w.Tasks) > len(victim.Tasks) {
			victim = w
		}
	}
	require.NotEmpty(t, victim.Tasks)

	procs[victim.PID].signal(syscall.SIGKILL)
	killed := time.Now()
	<-procs[victim.PID].done
	var gone inspect.WorkerInfo
	poll(t, 30*time.Second, "the killed worker listed gone with its orphaned tasks", func() bool {
		for _, w := range list() {
			if w.ID == victim.ID && w.State == inspect.WorkerGone && w.Orphaned == len(victim.Tasks) {
				gone = w
				return true
			}
		}
		return false
	})
	t.Logf("killed worker listed gone %s after SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	require.Equal(t, taskIDs(victim), taskIDs(gone))
	for _, task := range gone.Tasks {
		require.True(t, task.Orphaned, task.ID)
		require.NotNil(t, task.LeaseExpiresAt, task.ID)
		require.NotNil(t, task.RecoveryFrom, task.ID)
		require.NotNil(t, task.RecoveryBy, task.ID)
		require.True(t, task.RecoveryFrom.After(*task.LeaseExpiresAt))
		require.True(t, task.RecoveryBy.After(*task.RecoveryFrom))
	}
	alive := 0
	for _, w := range list() {
		if w.ID != victim.ID && w.State == inspect.WorkerAlive {
			alive++
		}
	}
	require.Equal(t, 2, alive, "the other workers stay alive")

	out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "workers")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "gone")
	require.Contains(t, out, "orphaned: recovered in")
}
