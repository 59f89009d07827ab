package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// hostile is text that rewrites an operator's terminal: a window title,
// a cleared screen, a line moved up and erased, a bidi override.
const hostile = "x\x1b]0;pwned\a\x1b[2J\x1b[1A\x1b[2K\u202e\u0085y"

// requireNoRawControl fails when s shows a control or bidi character raw
// (other than the newlines and tabs of the layout).
func requireNoRawControl(t *testing.T, s string) {
	t.Helper()
	for i, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		require.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069),
			"raw U+%04X at byte %d of %q", r, i, s)
	}
}

// TestEnqueuerRefusesControlCharacters (#23 item 4): enqueuer refuses a
// task whose id, agent (the config names none), action or correlation ID
// holds a control or bidi character, and the IDs "." and "..": exit 2,
// naming the field, enqueuing nothing. --in past tasks.MaxDelay is refused
// the same way (#23 item 6).
func TestEnqueuerRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		errHas []string
	}{
		{"id", []string{"--agent", "tool", "--id", "a\x1b[2Jb"}, "", []string{`field "id"`, "U+001B"}},
		{"id with a bidi override", []string{"--agent", "tool", "--id", "ab\u202ecd"}, "", []string{`field "id"`, "U+202E"}},
		{"id dot", []string{"--agent", "tool", "--id", "."}, "", []string{`field "id"`, `"."`}},
		{"id dot dot", []string{"--agent", "tool", "--id", ".."}, "", []string{`field "id"`, `".."`}},
		{"agent", []string{"--agent", "to\x1b]0;t\aol"}, "", []string{`field "agent"`}},
		{"action", []string{"--agent", "tool", "--action", hostile}, "", []string{`field "action"`, "U+001B"}},
		{"action with C1", []string{"--agent", "tool", "--action", "a\u009bb"}, "", []string{`field "action"`, "U+009B"}},
		{"correlation id", []string{"--agent", "tool", "--correlation-id", "c\u2066d"}, "", []string{`field "correlation_id"`, "U+2066"}},
		{"file line action", []string{"--file", "-"}, `{"agent":"tool","action":"a\u001b[1Ab"}` + "\n", []string{"line 1:", `field "action"`}},
		{"file line correlation id", []string{"--file", "-"}, `{"agent":"tool","correlation_id":"\u200f"}` + "\n", []string{"line 1:", `field "correlation_id"`}},
		{"in too large", []string{"--agent", "tool", "--in", "87601h"}, "", []string{"--in", "too large"}},
		{"file line in too large", []string{"--file", "-"}, `{"agent":"tool","in":"2561900h"}` + "\n", []string{"line 1:", `field "in"`, "too large"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append([]string{"--redis", srv.URL()}, tc.args...)...)
			require.Equal(t, ExitUsage, code, "stdout %q stderr %q", out, errOut)
			for _, s := range tc.errHas {
				require.Contains(t, errOut, s)
			}
			requireNoRawControl(t, errOut)
		})
	}
	n, err := rdb.Exists(context.Background(), "asynq:{default}:pending", "asynq:{default}:scheduled").Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing was enqueued")
}

// TestInspectorCancelReasonRefused (#23 item 4): a cancel reason with a
// control character is a usage error (exit 2) naming --reason.
func TestInspectorCancelReasonRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.client.Enqueue(context.Background(), tasks.Task{ID: "cr1", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	_, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", "cr1", "--reason", "ok\x1b[2J")
	require.Equal(t, ExitUsage, code, errOut)
	require.Contains(t, errOut, "--reason")
	require.Contains(t, errOut, "U+001B")
	v, err := b.client.Store().Get(context.Background(), "cr1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateScheduled, v.State, "not canceled")
}

// TestInspectorEscapesHostileRecords (#23 item 4): records written before
// producers refused control characters (here: straight into Redis) are
// shown by every text output of the inspector with their control and
// bidi characters escaped, never raw; --json stays valid JSON that
// round-trips the text, with no raw control character either.
func TestInspectorEscapesHostileRecords(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	b := bundle{url: srv.URL(), dlq: deadletter.NewStore(rdb)}
	ctx := context.Background()
	id := "task" + hostile
	// A task record and history, as an old producer could have written.
	require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), "id", id, "agent", "agent"+hostile, "action", "act"+hostile,
		"state", "canceled"+hostile, "error_class", "logic_error", "error", "err"+hostile,
		"correlation_id", "corr"+hostile, "cancel_reason", "why"+hostile, "canceled_at", "now", "run", "0").Err())
	ev, err := json.Marshal(tasks.Event{At: time.Now(), Event: "failed" + hostile, ErrorClass: "logic_error" + hostile, Error: "boom" + hostile})
	require.NoError(t, err)
	require.NoError(t, rdb.RPush(ctx, rkeys.TaskHistory(id), ev).Err())
	// A dead letter with the same fields (Put does not check them).
	_, err = b.dlq.Put(ctx, &deadletter.Entry{ID: id, Agent: "agent" + hostile, Action: "act" + hostile, ErrorClass: "logic_error",
		Error: "err" + hostile, Reason: "not_retryable" + hostile, CorrelationID: "corr" + hostile, Queue: "q" + hostile,
		Params: json.RawMessage(`{"p":"\u202e"}`), DeadLetteredAt: time.Now(),
		History: []tasks.Event{{Event: "dead_lettered" + hostile, Error: "boom" + hostile}}})
	require.NoError(t, err)
	// A breaker and a restart whose keys carry it too.
	require.NoError(t, breaker.New(rdb).Trip(ctx, "key"+hostile, time.Hour))
	require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: id}).Err())

	for _, args := range [][]string{
		{"task", id},
		{"dlq", "list"},
		{"dlq", "show", id},
		{"breakers"},
		{"restarts"},
		{"stats"},
	} {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append([]string{"--redis", b.url}, args...)...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		requireNoRawControl(t, out)
		requireNoRawControl(t, errOut)
		require.NotContains(t, out, "\x1b", args)
		if args[0] != "stats" {
			require.Contains(t, out, `\x1b]0;pwned\x07\x1b[2J`, "%v shows the escapes: %s", args, out)
		}
	}
	// The JSON outputs escape control characters themselves and keep the text.
	for _, args := range [][]string{{"task", id, "--json"}, {"dlq", "list", "--json"}, {"dlq", "show", id, "--json"}, {"breakers", "--json"}} {
		out, errOut, code := runCmd(t, NewInspectorCmd, "", append([]string{"--redis", b.url}, args...)...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		requireNoRawControl(t, out) // encoding/json leaves C1 and bidi raw: safeJSON escapes them
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[0]), &m), args)
		require.Contains(t, string(mustJSON(t, m)), `\u001b]0;pwned\u0007`, args)
		require.Contains(t, out, `\u202e\u0085y`, args)
		require.Contains(t, fmt.Sprint(m), hostile, "%v: the JSON still means the same text", args)
	}
	// Export: the same JSON lines, nothing raw.
	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "dlq", "export")
	require.Equal(t, 0, code, errOut)
	requireNoRawControl(t, out)
	var exported map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &exported))
	require.Equal(t, id, exported["id"])

	// Canceling it: the table names it escaped; so does the error of a
	// second cancel (the task has ended).
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", id)
	require.Equal(t, 0, code, errOut)
	requireNoRawControl(t, out)
	require.Contains(t, out, `\x1b]0;pwned`)
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "cancel", id)
	require.Equal(t, 1, code)
	requireNoRawControl(t, errOut)
	require.Contains(t, errOut, `\x1b]0;pwned`)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestClean: the escapes clean writes.
func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode ✓":  "plain text, ünïcode ✓",
		"a\x1b[2Jb":              `a\x1b[2Jb`,
		"t\ta\nb\rc\x00\x7f":     `t\ta\nb\rc\x00\x7f`,
		"c1\u0085\u009b":         `c1\u0085\u009b`,
		"bidi\u202e\u2066\u200f": `bidi\u202e\u2066\u200f`,
		"bad\xffutf8":            `bad\xffutf8`,
		"replacement \uFFFD ok":  "replacement \uFFFD ok",
	} {
		require.Equal(t, want, clean(in), "%q", in)
	}
	require.Equal(t, "line one\n\tline two \\x1b", cleanText("line one\n\tline two \x1b"))
	for in, want := range map[string]string{
		`{"a":"plain ✓"}`:                   `{"a":"plain ✓"}`,
		"{\"a\":\"x\u009b2J\u202e\u007f\"}": `{"a":"x\u009b2J\u202e\u007f"}`,
		"{\"a\":\"tag\U000E0041\"}":         `{"a":"tag\udb40\udc41"}`,
	} {
		got := safeJSON([]byte(in))
		require.Equal(t, want, string(got), "%q", in)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(in), &a))
		require.NoError(t, json.Unmarshal(got, &b))
		require.Equal(t, a, b, "the same document")
	}
	var sb strings.Builder
	tprintf(&sb, "%s|%s|%d|%v\n", tasks.State("s\x1b"), "x\x07", 3, errors.New("e\x1b[2J"))
	require.Equal(t, `s\x1b|x\x07|3|e\x1b[2J`+"\n", sb.String())
}
