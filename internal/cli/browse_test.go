package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestInspectorTasks: `inspector tasks` pages with --limit and --cursor
// (the table prints the next cursor; --json ends with {"next_cursor"}),
// filters by agent and correlation ID, and refuses a bad state (exit 2).
func TestInspectorTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	var batch []tasks.Task
	for i := range 30 {
		batch = append(batch, tasks.Task{ID: fmt.Sprintf("c%02d", i), Agent: []string{"llm", "tool"}[i%2], CorrelationID: fmt.Sprintf("o%d", i%5)})
	}
	_, err := tasks.NewClient(srv.Client()).EnqueueMany(ctx, batch)
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "tasks", "--agent", "tool", "--limit", "10")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "LISTED AS")
	require.Contains(t, out, "next page: --cursor ")
	cur := strings.TrimSpace(out[strings.Index(out, "--cursor ")+len("--cursor "):])

	seen := map[string]bool{}
	for {
		out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "tasks", "--agent", "tool", "--limit", "10", "--json", "--cursor", cur)
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines[:len(lines)-1] {
			var tk struct {
				ID       string `json:"id"`
				ListedAs string `json:"listed_as"`
			}
			require.NoError(t, json.Unmarshal([]byte(l), &tk))
			require.Equal(t, "pending", tk.ListedAs)
			seen[tk.ID] = true
		}
		var nc NextCursor
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &nc))
		if nc.NextCursor == "" {
			break
		}
		cur = nc.NextCursor
	}
	require.Len(t, seen, 5, "the pages after the first")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "tasks", "--correlation-id", "o3", "--state", "pending")
	require.Equal(t, 0, code)
	require.Equal(t, 6, strings.Count(out, " o3 "), out)
	require.Contains(t, out, "(end of the listing)")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "tasks", "--state", "done")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "done")
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "tasks", "--cursor", "x!")
	require.Equal(t, ExitUsage, code)
}

// TestInspectorQueuePause: `inspector queue pause|resume NAME`, and
// `inspector stats` shows the paused queue.
func TestInspectorQueuePause(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	_, err := tasks.NewClient(srv.Client()).Enqueue(context.Background(), tasks.Task{ID: "p1", Agent: "llm"})
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("worker:\n  queues: {default: 1}\n"), 0o600))
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "queue", "pause", "default")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "queue default paused")
	out, _, _ = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "stats")
	require.Contains(t, out, "PAUSED")
	require.Contains(t, out, "paused")
	out, _, _ = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "stats", "--json")
	require.Contains(t, out, `"paused":true`)
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "queue", "resume", "default", "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"queue":"default","paused":false,"changed":true}`, out)
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "queue", "pause", "nope")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "unknown queue")
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "queue", "pause")
	require.Equal(t, ExitUsage, code)
}
