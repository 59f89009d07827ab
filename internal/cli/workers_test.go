package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/registry"
)

// TestInspectorWorkers: `inspector workers` lists a worker of the
// registry with its task in flight, as a table and as JSON Lines.
func TestInspectorWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "workers", "--json")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out, "no worker yet")

	hb := registry.NewHeartbeat(b.rdb.(redis.UniversalClient), map[string]int{"default": 1}, 3, "", nil, nil, 0)
	hb.Track("t-1", "t-1", "tool", "default")
	require.NoError(t, hb.Beat(context.Background()))

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "workers", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1)
	var w inspect.WorkerInfo
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &w))
	require.Equal(t, hb.ID(), w.ID)
	require.Equal(t, inspect.WorkerAlive, w.State)
	require.Equal(t, 3, w.Concurrency)
	require.Len(t, w.Tasks, 1)
	require.Equal(t, "t-1", w.Tasks[0].ID)
	require.WithinDuration(t, time.Now(), w.LastHeartbeat, time.Minute)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "workers")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "LAST HEARTBEAT")
	require.Contains(t, out, hb.ID())
	require.Contains(t, out, "alive")
	require.Contains(t, out, "t-1 (tool,")
	require.Contains(t, out, "default:1")
}
