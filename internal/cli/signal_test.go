package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/tasks"
)

// TestInspectorTaskSignal: `inspector task signal` sends a signal (a
// table, or --json), reports a duplicate, refuses bad --data before
// connecting, and an unknown or ended task with exit status 1; `inspector
// task ID` shows the signal in the history.
func TestInspectorTaskSignal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.client.Enqueue(ctx, tasks.Task{ID: "g1", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "g1", "approve", "--data", `{"ok":true}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "SIGNAL")
	require.Contains(t, out, "approve")
	require.Contains(t, out, "scheduled")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "g1", "approve", "--json")
	require.Equal(t, 0, code, errOut)
	var res tasks.SignalResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, tasks.SignalResult{ID: "g1", Name: "approve", State: tasks.StateScheduled, Duplicate: true}, res)

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "g1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "signal approve (11 B)")
	require.Contains(t, out, "Signals:")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "g1", "x", "--data", `{`)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "not JSON")
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "g1", "a b")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "invalid signal")
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "ghost", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no task with ID "ghost"`)

	_, err = b.client.Cancel(ctx, "g1", "")
	require.NoError(t, err)
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "signal", "g1", "late")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot be signaled")
}
