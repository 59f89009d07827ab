package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// A config file over config.MaxFileSize is bad input (exit 2) named with
// its path and the limit, and is not decoded.
func TestConfigFileSizeCap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "huge.yaml")
	line := "# " + strings.Repeat("x", 1021) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat(line, 4*1024+1)), 0o600))
	for _, tc := range []struct {
		name   string
		newCmd func(*App) *cobra.Command
		args   []string
	}{
		{"inspector", NewInspectorCmd, []string{"--config", path, "stats"}},
		{"worker", NewWorkerCmd, []string{"--config", path}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCmd(t, tc.newCmd, "", tc.args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, path)
			require.Contains(t, errOut, "4 MiB limit")
		})
	}
}

// opsConfig writes a config naming llm (breaker llm.example, limits key
// openai-prod) and tool (breaker tool, no limits).
func opsConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
agents:
  llm:
    http: {url: "http://127.0.0.1:1/v1"}
    breaker_key: llm.example
    limits: {key: openai-prod, requests: 10, per: 1m}
  tool:
    http: {url: "http://127.0.0.1:1/tool"}
`), 0o600))
	return path
}

// TestBreakerTripRefusesUnknownKeys: a trip (or reset) of a key that no
// agent of the config uses and Redis has no breaker for is refused with
// exit 1 naming the known keys, and writes nothing; --force does it.
// Without --config, the breakers Redis knows are the known keys.
func TestBreakerTripRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := opsConfig(t)
	br := breaker.New(rdb)
	listed := func() []string {
		list, err := br.List(ctx)
		require.NoError(t, err)
		var keys []string
		for _, b := range list {
			keys = append(keys, b.Key)
		}
		return keys
	}

	for _, args := range [][]string{
		{"--config", cfg, "breaker", "trip", "llm.exmaple", "--for", "10m"},
		{"--config", cfg, "breaker", "reset", "llm.exmaple"},
	} {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append([]string{"--redis", srv.URL()}, args...)...)
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, errOut, `"llm.exmaple"`)
		require.Contains(t, errOut, `known breaker keys: "llm.example", "tool"`)
		require.Contains(t, errOut, "--force")
		require.Empty(t, out)
	}
	require.Empty(t, listed(), "a refused trip writes nothing")
	n, err := rdb.Exists(ctx, rkeys.Breaker("llm.exmaple")).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	// A configured key that no worker used yet is known.
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "breaker", "trip", "tool", "--for", "10m")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "breaker tool tripped")

	// Without a config: the breakers in Redis are the known keys.
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "breaker", "reset", "tool")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "breaker", "trip", "llm.example", "--for", "1m")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, `known breaker keys: "tool"`)

	// --force: the operator insists.
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "breaker", "trip", "phantom", "--for", "1m", "--force")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "breaker phantom tripped")
	require.Equal(t, []string{"phantom", "tool"}, listed())

	// A bad --for is bad usage before the key is looked at.
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "breaker", "trip", "nope")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--for")
}

// TestLimitsResume: `inspector limits resume KEY` ends a provider pause
// fleet-wide (the next admission passes), says what it cleared, and
// refuses a key that no agent of the config uses and no worker registered.
func TestLimitsResume(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := opsConfig(t)
	l := limit.New(rdb)
	lc := limit.Config{Concurrency: 2}
	require.NoError(t, l.Register(ctx, "tool-runs", lc))
	until, _, err := l.Pause(ctx, "tool-runs", 10*time.Minute, "provider: 429 with retry-after 10m0s")
	require.NoError(t, err)
	a, err := l.Admit(ctx, "tool-runs", lc)
	require.NoError(t, err)
	require.False(t, a.Allowed)
	require.Equal(t, limit.Paused, a.Limit)

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "resume", "tool-runs", "--json")
	require.Equal(t, 0, code, errOut)
	var res ResumeResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "tool-runs", res.Key)
	require.True(t, res.Resumed)
	require.NotNil(t, res.PausedUntil)
	require.True(t, res.PausedUntil.Equal(until), "%s vs %s", res.PausedUntil, until)
	require.Equal(t, "provider: 429 with retry-after 10m0s", res.PauseReason)

	st, err := l.Status(ctx, "tool-runs")
	require.NoError(t, err)
	require.Nil(t, st.PausedUntil)
	require.Equal(t, 2, st.Concurrency, "the registered limits are kept")
	a, err = l.Admit(ctx, "tool-runs", lc)
	require.NoError(t, err)
	require.True(t, a.Allowed, "admitted again at once")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "resume", "tool-runs")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "tool-runs was not paused")

	// A key of the config, never registered, is known (and not paused).
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "resume", "openai-prod", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"resumed":false`)

	// A typo is refused, naming the known keys, and writes nothing.
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "resume", "openai-prd")
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, errOut, `"openai-prd"`)
	require.Contains(t, errOut, `known limits keys: "openai-prod", "tool", "tool-runs"`)
	require.Contains(t, errOut, "--force")
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "resume", "openai-prd", "--force")
	require.Equal(t, 0, code, errOut)
	n, err := rdb.Exists(ctx, rkeys.LimitState("openai-prd")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "resume creates no key")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "limits", "resume")
	require.Equal(t, ExitUsage, code, errOut)
}

// TestLimitsResumeBreakerKeyPause: a provider's pause on the breaker key of
// an HTTP agent without limits (which a worker writes, internal/delivery's
// pause-only spec, and registers nowhere) is listed by `inspector limits`
// while it is in force and is a known key for `limits resume`, with or
// without --config: it used to be refused as unknown, so that only Redis by
// hand could end it.
func TestLimitsResumeBreakerKeyPause(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := opsConfig(t) // agent "tool": HTTP, no limits, breaker key "tool"
	l := limit.New(rdb)

	// Not paused: not listed (it has no limits to show).
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "--json")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, `"key":"tool"`)

	for _, withConfig := range []bool{true, false} {
		until, _, err := l.Pause(ctx, "tool", 10*time.Minute, "provider: 429 with retry-after 10m0s")
		require.NoError(t, err)

		if withConfig {
			out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", cfg, "limits", "--json")
			require.Equal(t, 0, code, errOut)
			var row map[string]any
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var r map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				if r["key"] == "tool" {
					row = r
				}
			}
			require.NotNil(t, row, "a paused breaker key is listed: %s", out)
			require.NotNil(t, row["paused_until"])
			require.Equal(t, []any{"tool"}, row["agents"])
		}

		args := []string{"--redis", srv.URL(), "limits", "resume", "tool", "--json"}
		if withConfig {
			args = append([]string{"--config", cfg}, args...)
		}
		out, errOut, code = runCmd(t, NewInspectorCmd, "", args...)
		require.Equal(t, 0, code, "config %v: %s", withConfig, errOut)
		var res ResumeResult
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.True(t, res.Resumed)
		require.NotNil(t, res.PausedUntil)
		require.True(t, res.PausedUntil.Equal(until))
		left, err := l.PausedFor(ctx, "tool")
		require.NoError(t, err)
		require.Zero(t, left, "the pause is over")
	}
}
