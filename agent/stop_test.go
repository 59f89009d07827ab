package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

// TestExecQuickStop: a call whose context is canceled with a quick stop
// (its task was canceled) SIGKILLs its process group QuickStopGrace after
// the SIGTERM, not after KillGrace (a minute here): a leader and children
// that ignore SIGTERM are gone long before.
func TestExecQuickStop(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	params, err := json.Marshal(map[string]any{"mode": "hang", "children": 2, "pid_file": pidFile, "ignore_term": true})
	require.NoError(t, err)
	e := newExec(t, agent.ExecConfig{KillGrace: time.Minute})
	ctx, cancel := context.WithCancel(agent.WithQuickStop(context.Background(), func() bool { return true }))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, req("quick", string(params)))
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the pid file is complete
	pids := readPIDs(t, pidFile)
	cancel()
	select {
	case err := <-done:
		require.Equal(t, resilience.Canceled, requireFailure(t, err).Class)
	case <-time.After(30 * time.Second):
		t.Fatal("a quick stop waited for the kill grace")
	}
	requireAllGone(t, pids)
}
