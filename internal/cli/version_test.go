package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/redistest"
)

// runCmdEnv is runCmd with env as the process's environment.
func runCmdEnv(t *testing.T, env map[string]string, newCmd func(*App) *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Out: &out, Err: &errb, In: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}
	code := Main(context.Background(), app, newCmd, args)
	return out.String(), errb.String(), code
}

// TestVersion (#39 item 3): --version on every command prints
// "<binary> <version> (<revision>)" and exits 0, touching no Redis.
func TestVersion(t *testing.T) {
	t.Parallel()
	for name, newCmd := range map[string]func(*App) *cobra.Command{
		"worker": NewWorkerCmd, "enqueuer": NewEnqueuerCmd, "inspector": NewInspectorCmd,
	} {
		out, errOut, code := runCmd(t, newCmd, "", "--version")
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, name+" "+buildinfo.Version()+" ("+buildinfo.Revision()+")\n", out)
	}
}

// TestConfigFromEnv (#39 item 13): AGENTQ_CONFIG is the config when
// --config is not given, and --config wins over it.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badTimeout := filepath.Join(dir, "timeout.yaml")
	require.NoError(t, os.WriteFile(badTimeout, []byte("agents:\n  x:\n    timeout: -1s\n"), 0o600))
	badKey := filepath.Join(dir, "key.yaml")
	require.NoError(t, os.WriteFile(badKey, []byte("worker:\n  concurency: 3\n"), 0o600))
	env := map[string]string{EnvConfig: badTimeout}

	_, errOut, code := runCmdEnv(t, env, NewWorkerCmd)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "agents.x.timeout")
	_, errOut, code = runCmdEnv(t, env, NewWorkerCmd, "--config", badKey)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "worker.concurency")
	require.NotContains(t, errOut, "agents.x.timeout")

	// A command that answers from the config reads it from AGENTQ_CONFIG.
	srv := redistest.Start(t)
	good := filepath.Join(dir, "agentq.yaml")
	require.NoError(t, os.WriteFile(good, []byte("tenants:\n  acme: {budget: {tokens: 1000, per: 1h}}\nagents:\n  tool: {}\n"), 0o600))
	out, errOut, code := runCmdEnv(t, map[string]string{EnvConfig: good}, NewInspectorCmd, "--redis", srv.URL(), "budget", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var row map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &row), out)
	require.Equal(t, "acme", row["name"], out)
}

// TestCommandsNeedConfig (#39 item 13): the inspector commands whose
// answer comes from the config exit 2 saying so when none is given,
// instead of printing an empty or wrong answer.
func TestCommandsNeedConfig(t *testing.T) {
	t.Parallel()
	for want, args := range map[string][]string{
		"inspector budget":      {"budget"},
		"inspector schedules":   {"schedules"},
		"inspector tenants":     {"tenants", "--json"},
		"inspector queue pause": {"queue", "pause", "critical"},
	} {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append([]string{"--redis", "redis://127.0.0.1:1/0"}, args...)...)
		require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, want+" needs the config: pass --config or set AGENTQ_CONFIG", "%v", args)
	}
}

// TestLogFormat (#39 item 4): --log-format json|text on the worker and
// serve; anything else is exit 2 naming the flag, before Redis is touched.
func TestLogFormat(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--log-format", "xml"}, {"serve", "--log-format", "xml"}} {
		newCmd := NewWorkerCmd
		if args[0] == "serve" {
			newCmd = NewEnqueuerCmd
		}
		_, errOut, code := runCmd(t, newCmd, "", args...)
		require.Equal(t, ExitUsage, code, errOut)
		require.Contains(t, errOut, `--log-format must be json or text (got "xml")`)
	}
	for format, want := range map[string]string{LogJSON: `{"time":`, LogText: "time=", "": `{"time":`} {
		var buf bytes.Buffer
		NewLogger(&App{Err: &buf}, "info", format).Info("hello")
		require.True(t, strings.HasPrefix(buf.String(), want), "%q: %s", format, buf.String())
	}
}
