package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestAgentsDieWithTheirWorker (#23 item 1): a worker with 8 exec agents
// in flight (each with a child, both ignoring SIGTERM, under a 5 m
// timeout) is SIGKILLed. Within 2 s no agent, child or group guard of
// its runs is left. A second worker, started at once with the dead
// worker's leases expired, runs every task again; each run takes its
// task's flock (inherited by its child) first, so a run that starts
// while any process of an earlier run of its task is alive logs an
// "overlap": there is none, and every task succeeds on its second run.
func TestAgentsDieWithTheirWorker(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	dir := t.TempDir()
	effects, state, locks := filepath.Join(dir, "effects"), filepath.Join(dir, "state"), filepath.Join(dir, "locks")
	require.NoError(t, os.Mkdir(state, 0o755))
	require.NoError(t, os.Mkdir(locks, 0o755))
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 10, shutdown_timeout: 5s}
defaults:
  timeout: 5m
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 100ms}
agents:
  tool:
    exec: {command: [%q]}
`, b.agent))
	w1 := start(t, "worker-1", b.worker, "--config", cfg, "--redis", srv.URL())

	const n = 8
	var ids, lines []string
	for i := range n {
		id := fmt.Sprintf("orphan-%d", i)
		ids = append(ids, id)
		params, err := json.Marshal(map[string]any{
			"mode": "hang", "children": 1, "ignore_term": true, // the first call of each task hangs
			"times": 1, "state_dir": state, // the second succeeds
			"pid_file": filepath.Join(dir, id+".pids"), "effects": effects, "lock_dir": locks,
		})
		require.NoError(t, err)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"tool","action":"run","params":%s}`, id, params))
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, strings.Fields(out))

	// Every agent, its child and its group's guard (the group's leader).
	var pids []int
	poll(t, 60*time.Second, "8 agents and their children to start", func() bool {
		pids = pids[:0]
		for _, id := range ids {
			runs := effectLines(t, effects, id)
			kids, err := os.ReadFile(filepath.Join(dir, id+".pids"))
			if len(runs) != 1 || err != nil {
				return false
			}
			agent, _ := strconv.Atoi(runs[0][3])
			child, _ := strconv.Atoi(strings.TrimSpace(string(kids)))
			pids = append(pids, agent, child)
			if guard, err := syscall.Getpgid(agent); err == nil && guard != agent {
				pids = append(pids, guard)
			}
		}
		return true
	})
	t.Logf("%d processes in flight: %v", len(pids), pids)

	killed := time.Now()
	require.NoError(t, syscall.Kill(w1.cmd.Process.Pid, syscall.SIGKILL)) // the worker alone, not its process group
	<-w1.done
	for _, id := range ids {
		expireLease(t, rdb, id)
	}
	w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())

	for {
		var left []int
		for _, pid := range pids {
			if !pidGone(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			t.Logf("all gone %s after the worker's SIGKILL", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > 2*time.Second {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v outlived their worker's SIGKILL by 2s", left)
		}
		time.Sleep(5 * time.Millisecond)
	}

	views := waitStates(t, rdb, ids, 60*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateSucceeded, views[id].State, id)
		runs := effectLines(t, effects, id)
		require.Len(t, runs, 2, "%s: the hung run, then the redelivered one: %v", id, runs)
		for _, r := range runs {
			require.Equal(t, "hang", r[4], "%s: a run overlapped a surviving copy: %v", id, runs)
		}
	}
	require.Equal(t, 0, w2.stop(t, 15*time.Second))
}
