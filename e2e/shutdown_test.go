package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestGracefulShutdown: on SIGTERM a worker lets a short task finish, puts
// a hanging one back on the queue within shutdown_timeout without using an
// attempt, and leaves none of the hanging agent's processes behind.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	pidFile := filepath.Join(t.TempDir(), "pids")
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 3s}
defaults: {timeout: 60s}
agents:
  tool: {exec: {command: [%q]}}
`, b.agent))
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	_, errOut, code := run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "tool", "--id", "hang-1",
		"--params", fmt.Sprintf(`{"mode":"hang","children":2,"pid_file":%q}`, pidFile))
	require.Equal(t, 0, code, errOut)
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) < 2 {
		require.True(t, time.Now().Before(deadline), "hanging agent never wrote its children's PIDs")
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err := tasks.NewClient(rdb).Enqueue(t.Context(), tasks.Task{ID: "short-1", Agent: "tool", Params: []byte(`{"mode":"sleep","ms":1500}`)})
	require.NoError(t, err)
	waitState(t, rdb, "short-1", tasks.StateActive, 10*time.Second)

	began := time.Now()
	require.Equal(t, 0, w.stop(t, 20*time.Second))
	took := time.Since(began)
	require.Less(t, took, 15*time.Second)
	t.Logf("worker stopped %s after SIGTERM (shutdown_timeout 3s)", took)

	st := tasks.NewStore(rdb)
	var v *tasks.View
	v, err = st.Get(t.Context(), "short-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateSucceeded, v.State, "an in-flight task that finishes within shutdown_timeout completes")

	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(tasks.DefaultQueue, "hang-1")
	require.NoError(t, err, "the hanging task must be back on its queue")
	require.Equal(t, asynq.TaskStatePending, info.State)
	require.Equal(t, 0, info.Retried, "putting a task back on shutdown uses no attempt")
	v, err = st.Get(t.Context(), "hang-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)
	require.Equal(t, tasks.EventInterrupted, v.History[len(v.History)-1].Event)

	for _, pid := range pids {
		requireGone(t, pid, 10*time.Second)
	}
}

func waitState(t *testing.T, rdb *redis.Client, id string, want tasks.State, d time.Duration) {
	t.Helper()
	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(d)
	for {
		v, err := st.Get(t.Context(), id)
		if err == nil && v.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s within %s: %+v %v", id, want, d, v, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireGone waits until pid no longer exists (or is a zombie).
func requireGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := syscall.Kill(pid, 0)
		if err == syscall.ESRCH {
			return
		}
		if b, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); rerr == nil {
			if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent child process %d still alive %s after shutdown", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
