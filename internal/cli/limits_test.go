package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/redistest"
)

// TestInspectorLimits: `inspector limits` lists the keys the workers
// registered and those the config names, with their usage and pause, as a
// table or JSON Lines; `stats --json` carries the same objects.
func TestInspectorLimits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	l := limit.New(rdb)
	registered := limit.Config{Concurrency: 3}
	require.NoError(t, l.Register(ctx, "tool-runs", registered))
	a, err := l.Admit(ctx, "tool-runs", registered)
	require.NoError(t, err)
	require.True(t, a.Allowed)
	_, _, err = l.Pause(ctx, "tool-runs", time.Minute, "provider: 429 with retry-after 1m0s")
	require.NoError(t, err)

	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
agents:
  llm:
    breaker_key: openai-prod
    limits: {requests: 500, tokens: 200000, per: 1m, concurrency: 20}
`), 0o600))

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	var rows []map[string]any
	for _, line := range lines {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row))
		rows = append(rows, row)
	}
	require.Equal(t, "openai-prod", rows[0]["key"])
	require.EqualValues(t, 500, rows[0]["requests"])
	require.EqualValues(t, 200000, rows[0]["tokens"])
	require.Equal(t, "1m0s", rows[0]["per"])
	require.EqualValues(t, 20, rows[0]["concurrency"])
	require.Nil(t, rows[0]["paused_until"])
	require.Equal(t, []any{"llm"}, rows[0]["agents"])
	for _, k := range []string{"requests_in_window", "tokens_in_window", "in_flight", "paused_until", "pause_reason", "refusals"} {
		require.Contains(t, rows[0], k)
	}
	require.Equal(t, "tool-runs", rows[1]["key"])
	require.EqualValues(t, 3, rows[1]["concurrency"])
	require.EqualValues(t, 1, rows[1]["in_flight"])
	require.NotNil(t, rows[1]["paused_until"])
	require.Equal(t, "provider: 429 with retry-after 1m0s", rows[1]["pause_reason"])

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits")
	require.Equal(t, 0, code)
	require.Contains(t, out, "KEY")
	require.Contains(t, out, "openai-prod")
	require.Contains(t, out, "1/3")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "stats", "--json")
	require.Equal(t, 0, code)
	var st Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Len(t, st.Limits, 2)
	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "stats")
	require.Equal(t, 0, code)
	require.Contains(t, out, "limits tool-runs:")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "extra")
	require.Equal(t, 2, code, errOut)
}

// TestInspectorLimitsPauseOnlyKey: a provider's pause of an HTTP agent
// that configures no limits (written on its breaker key) is listed by
// `inspector limits`, with the agent, and `limits resume` knows the key.
func TestInspectorLimitsPauseOnlyKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
agents:
  llm:
    http: {url: 'http://127.0.0.1:1/v1/chat'}
    breaker_key: fake-backend
`), 0o600))

	_, _, err := limit.New(srv.Client()).Pause(ctx, "fake-backend", time.Minute, "provider: 429 with retry-after 1m0s")
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "--json")
	require.Equal(t, 0, code, errOut)
	var row map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &row), out)
	require.Equal(t, "fake-backend", row["key"])
	require.NotNil(t, row["paused_until"])
	require.Equal(t, "provider: 429 with retry-after 1m0s", row["pause_reason"])
	require.Equal(t, []any{"llm"}, row["agents"])

	// Without --config too: the pause registered its key.
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "resume", "fake-backend", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"resumed":true`)
}
