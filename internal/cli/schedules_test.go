package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/schedule"
)

// TestInspectorSchedules: inspector schedules lists the config's schedules
// with next fire, last fire, last task and its state (a table, and JSON
// Lines with --json).
func TestInspectorSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfgPath := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
agents:
  tool: {}
schedules:
  nightly: {cron: "30 1 * * *", timezone: Europe/Paris, agent: tool, action: report}
  beat: {cron: "@every 10s", agent: tool, overlap: skip}
`), 0o600))
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	defs, err := configx.Schedules(cfg)
	require.NoError(t, err)
	tick := time.Now().Add(-time.Minute).Truncate(10 * time.Second)
	opts, err := redis.ParseURL(b.url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = schedule.New(rdb, b.client, defs, schedule.Options{}).Fire(context.Background(), defs[0], tick)
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--config", cfgPath, "--redis", b.url, "schedules", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var beat, nightly map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &beat))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &nightly))
	require.Equal(t, "beat", beat["name"])
	require.Equal(t, "@every 10s", beat["cron"])
	require.Equal(t, "skip", beat["overlap"])
	require.Equal(t, schedule.TickID("beat", tick), beat["last_task_id"])
	require.Equal(t, "pending", beat["last_task_state"])
	require.NotEmpty(t, beat["next_fire"])
	require.Equal(t, "Europe/Paris", nightly["timezone"])
	require.Nil(t, nightly["last_fire"])

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--config", cfgPath, "--redis", b.url, "schedules")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "NEXT FIRE")
	require.Contains(t, out, schedule.TickID("beat", tick)+"  pending")
	require.Regexp(t, `nightly\s+30 1 \* \* \*\s+Europe/Paris\s+tool\s+\S+Z\s+-\s+-\s+-`, out)
}
