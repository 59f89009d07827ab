package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/tasks"
)

// TestInspectorTaskCancel: `inspector task cancel` cancels each task and
// reports each; an ended or unknown task is reported (naming its state)
// and makes the exit status 1; `inspector task ID` still shows a task.
func TestInspectorTaskCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		_, err := b.client.Enqueue(ctx, tasks.Task{ID: id, Agent: "tool"}, tasks.ProcessIn(time.Hour))
		require.NoError(t, err)
	}

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", "k1", "--reason", "not needed")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "k1")
	require.Contains(t, out, "canceled")
	require.Contains(t, out, "scheduled")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "k1", "--json")
	require.Equal(t, 0, code, errOut)
	var v tasks.View
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, tasks.StateCanceled, v.State)
	require.Equal(t, "not needed", v.History[len(v.History)-1].Reason)

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "k1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "not needed")

	// Several IDs: each is reported; any failure is exit 1.
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", "k2", "k1", "ghost", "k3", "--json")
	require.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		got = append(got, m)
	}
	require.Equal(t, "canceled", got[0]["state"])
	require.Equal(t, "scheduled", got[0]["previous_state"])
	require.Equal(t, "task_ended", got[1]["code"])
	require.Equal(t, "canceled", got[1]["state"])
	require.Equal(t, "not_found", got[2]["code"])
	require.Equal(t, "k3", got[3]["id"])
	require.Equal(t, "canceled", got[3]["state"])
	require.Contains(t, errOut, "k1")
	require.Contains(t, errOut, "state canceled")
	require.Contains(t, errOut, "ghost")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", "k2")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "already ended (state canceled)")
	require.Empty(t, out, "no table when nothing was canceled")

	// An ID given twice is canceled once (not refused as ended the second time).
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", "k4", "k4", "--json")
	require.Equal(t, 0, code, errOut)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 1, out)

	// Bad usage: exit 2, before any connection.
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", "redis://127.0.0.1:1/0", "task", "cancel")
	require.Equal(t, 2, code, errOut)
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", "redis://127.0.0.1:1/0", "task", "cancel", "x", "--reason", strings.Repeat("r", tasks.MaxCancelReason+1))
	require.Equal(t, 2, code)
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task")
	require.Equal(t, 2, code, "inspector task still takes one ID")
}
