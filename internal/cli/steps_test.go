package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	agentusage "github.com/agentq/agentq/internal/usage"
)

// TestInspectorTaskSteps (#37): `inspector task steps ID` prints the
// task's recorded steps in the order they were recorded, each with its
// attempt, size, tokens and the start of its data (escaped for the
// terminal, cut at 60 characters); --json is {"id", "steps": {name: data}};
// a task without steps prints the header only; an unknown task exits 1.
func TestInspectorTaskSteps(t *testing.T) {
	t.Parallel()
	rdb, url := redistest.Backends()[1].New(t)
	ctx := context.Background()
	st := record.NewStore(rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	for _, id := range []string{"stepped", "plain"} {
		ok, err := st.Create(ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		require.True(t, ok)
	}
	long := `"` + strings.Repeat("x", 100) + `"`
	for i, s := range []record.Step{
		{Name: "plan", Data: json.RawMessage(`{"outline":["a","b"]}`), Usage: agentusage.Usage{InputTokens: 70, OutputTokens: 30, TotalTokens: 100}},
		{Name: "draft", Data: json.RawMessage(long)},
		{Name: "evil", Data: json.RawMessage(`"\u001b[2J"`)},
	} {
		d := record.Delivery{ID: "stepped", Attempt: 1 + i/2, Seed: seed}
		_, _, err := st.ApplyStart(ctx, d, record.Started())
		require.NoError(t, err)
		ok, err := st.Step(ctx, d, s)
		require.NoError(t, err)
		require.True(t, ok)
	}

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps", "stepped")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^NAME +ATTEMPT +BYTES +TOKENS +DATA$`, lines[0])
	require.Regexp(t, `^plan +1 +21 +100 +\{"outline":\["a","b"\]\}$`, lines[1])
	require.Regexp(t, `^draft +1 +102 +- +"x{58}…$`, lines[2])
	require.Regexp(t, `^evil +2 +11 +- +"\\u001b\[2J"$`, lines[3], "stored as JSON escapes, shown as is")
	require.NotContains(t, out, "\x1b")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps", "stepped", "--json")
	require.Equal(t, 0, code, errOut)
	var js TaskSteps
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	require.Equal(t, "stepped", js.ID)
	require.Len(t, js.Steps, 3)
	require.JSONEq(t, `{"outline":["a","b"]}`, string(js.Steps["plan"]))
	require.JSONEq(t, long, string(js.Steps["draft"]))

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps", "plain")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), "the header only: %q", out)
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps", "plain", "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"id":"plain","steps":{}}`, out)

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no task with ID "nope"`)
	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", url, "task", "steps")
	require.Equal(t, 2, code, errOut)
}
