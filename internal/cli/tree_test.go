package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// TestInspectorTaskTree: `inspector task ID --tree` prints the run tree
// (each task indented under its parent, with its state and agent), and
// --json the tree as one object; an unknown ID exits 1; --tree with
// --follow is a usage error.
func TestInspectorTaskTree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.client.Enqueue(ctx, tasks.Task{ID: "top", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	top := &tasks.Envelope{ID: "top", Agent: "tool", Queue: tasks.DefaultQueue}
	_, err = b.client.PrepareChildren(ctx, top, 1, record.ModeAll, []tasks.ChildSpec{{Agent: "tool"}, {Agent: "tool", Name: "b"}})
	require.NoError(t, err)
	_, err = b.client.SpawnChildren(ctx, top, []tasks.ChildSpec{{Agent: "tool"}, {Agent: "tool", Name: "b"}})
	require.NoError(t, err)
	_, err = b.client.Cancel(ctx, "top.b", "")
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "top", "--tree")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "TASK")
	require.Regexp(t, `(?m)^top\s+scheduled\s+tool`, out)
	require.Regexp(t, `(?m)^  top\.1\s+pending\s+tool`, out)
	require.Regexp(t, `(?m)^  top\.b\s+canceled\s+tool`, out)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "top", "--tree", "--json")
	require.Equal(t, 0, code, errOut)
	var nd tasks.TreeNode
	require.NoError(t, json.Unmarshal([]byte(out), &nd))
	require.Equal(t, "top", nd.ID)
	require.Len(t, nd.Children, 2)
	require.Equal(t, tasks.StateCanceled, nd.Children[1].State)

	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "nope", "--tree")
	require.Equal(t, 1, code)
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "top", "--tree", "--follow")
	require.Equal(t, 2, code)
}
