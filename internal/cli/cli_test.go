package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

type bundle struct {
	url string
	dlq *deadletter.Store
	rdb interface {
		Close() error
	}
	client *tasks.Client
}

func setup(t *testing.T) bundle {
	t.Helper()
	rdb, url := redistest.Backends()[1].New(t) // real redis-server
	return bundle{url: url, dlq: deadletter.NewStore(rdb), rdb: rdb, client: tasks.NewClient(rdb)}
}

// runCmd runs a command tree through SetArgs with buffers.
func runCmd(t *testing.T, newCmd func(*App) *cobra.Command, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Out: &out, Err: &errb, In: strings.NewReader(stdin), Getenv: func(string) string { return "" }}
	code := Main(context.Background(), app, newCmd, args)
	return out.String(), errb.String(), code
}

func TestInspectorDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		class := "invalid_request"
		if id == "c" {
			class = "logic_error"
		}
		_, err := b.dlq.Put(ctx, &deadletter.Entry{ID: id, Agent: "tool", ErrorClass: class, Error: "boom " + id,
			Reason: "not_retryable", Attempts: 1, Params: json.RawMessage(`{}`),
			DeadLetteredAt: time.Unix(1700000000+int64(i), 0).UTC(), Queue: "default",
			History: []tasks.Event{{Event: "dead_lettered", Attempt: 1, ErrorClass: class}}})
		require.NoError(t, err)
	}
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "list", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, "c", first["id"], "newest first")
	for _, k := range []string{"id", "agent", "action", "params", "correlation_id", "error_class", "error", "attempts", "restarts", "dead_lettered_at", "history"} {
		require.Contains(t, first, k)
	}

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "list", "--class", "logic_error")
	require.Equal(t, 0, code)
	require.Contains(t, out, "1 of 1 dead letters")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "show", "a")
	require.Equal(t, 0, code)
	require.Contains(t, out, "boom a")
	require.Contains(t, out, "History:")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "show", "zzz")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no dead letter")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "export")
	require.Equal(t, 0, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 3)

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "requeue", "--all", "--class", "logic_error")
	require.Equal(t, 0, code)
	require.Equal(t, "c", strings.TrimSpace(out))
	v, err := b.client.Store().Get(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)
	require.Equal(t, 1, v.Run)

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "delete", "a")
	require.Equal(t, 0, code)
	require.Contains(t, out, "deleted 1 of 1")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "purge", "--yes")
	require.Equal(t, 0, code)
	require.Contains(t, out, "purged 1")

	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "stats", "--json")
	require.Equal(t, 0, code)
	var st Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Zero(t, st.DeadLetters)
	require.Equal(t, 1, st.Queues[0].Pending, "the requeued task waits on its queue")
}

func TestInspectorBreakers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("agents:\n  llm: {http: {url: \"http://127.0.0.1:1/\"}, breaker_key: llm.example}\n"), 0o600))
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "--config", cfg, "breaker", "trip", "llm.example", "--for", "10m")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "tripped")
	out, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "breakers", "--json")
	require.Equal(t, 0, code)
	var snap map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &snap))
	require.Equal(t, "llm.example", snap["key"])
	require.Equal(t, "open", snap["state"])
	require.Equal(t, "unhealthy", snap["health"])
	for _, k := range []string{"consecutive_failures", "failure_count", "success_count", "open_until", "last_failure_at", "last_success_at",
		"window_calls", "window_failures", "failing_tasks"} {
		require.Contains(t, snap, k)
	}
	_, _, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "breaker", "reset", "llm.example")
	require.Equal(t, 0, code)
	out, _, _ = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "breakers")
	require.Contains(t, out, "closed")
	// The text table shows rate mode's window too.
	require.Contains(t, out, "WINDOW FAIL/CALLS")
	require.Contains(t, out, "FAILING TASKS")
	require.Regexp(t, `llm\.example\s+closed\s+\S+\s+0\s+0/0\s+0\s`, out)
}

func TestEnqueuer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--agent", "tool", "--id", "e1", "--params", `{"x":1}`, "--in", "1h")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "e1", strings.TrimSpace(out))
	out, _, code = runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--agent", "tool", "--id", "e1", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"duplicate":true`)

	// A file with one bad line enqueues nothing and names the line.
	_, errOut, code = runCmd(t, NewEnqueuerCmd, "{\"id\":\"f1\",\"agent\":\"t\"}\n{\"id\":\"f2\",\"agent\":\n", "--redis", b.url, "--file", "-")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "line 2")
	_, err := b.client.Store().Get(context.Background(), "f1")
	require.ErrorIs(t, err, tasks.ErrNotFound)

	out, errOut, code = runCmd(t, NewEnqueuerCmd, "{\"id\":\"f1\",\"agent\":\"t\"}\n\n{\"id\":\"f2\",\"agent\":\"t\",\"params\":[1]}\n", "--redis", b.url, "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"f1", "f2"}, strings.Fields(out))
}
