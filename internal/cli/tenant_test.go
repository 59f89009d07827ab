package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/tasks"
)

// TestEnqueuerTenantPriority (#28): `enqueuer --tenant T --priority P`
// and "tenant"/"priority" on a --file line give the task its tenant and
// priority, which `inspector task` shows (table and --json); a bad value
// is exit 2 naming the flag or field, with nothing enqueued.
func TestEnqueuerTenantPriority(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--agent", "tool", "--id", "tp-1",
		"--tenant", "team-a", "--priority", "high")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = runCmd(t, NewEnqueuerCmd, `{"id":"tp-2","agent":"tool","tenant":"team-b","priority":"low"}`+"\n"+
		`{"id":"tp-3","agent":"tool"}`+"\n", "--redis", b.url, "--file", "-")
	require.Equal(t, 0, code, errOut)
	for id, want := range map[string][2]string{"tp-1": {"team-a", "high"}, "tp-2": {"team-b", "low"}, "tp-3": {"", "normal"}} {
		v, err := b.client.Store().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want[0], v.Tenant, id)
		require.Equal(t, want[1], v.Priority, id)

		out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", id, "--json")
		require.Equal(t, 0, code, errOut)
		var js map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &js))
		require.Equal(t, want[1], js["priority"], id)
		if want[0] == "" {
			require.NotContains(t, js, "tenant", id)
		} else {
			require.Equal(t, want[0], js["tenant"], id)
		}

		out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", id)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `Priority:\s+`+want[1]+`\n`, out, id)
		if want[0] == "" {
			require.Regexp(t, `Tenant:\s+\(default\)\n`, out, id)
		} else {
			require.Regexp(t, `Tenant:\s+`+want[0]+`\n`, out, id)
		}
	}

	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		errHas []string
	}{
		{"bad priority", []string{"--agent", "tool", "--id", "tpb-1", "--priority", "urgent"}, "", []string{"--priority", `"urgent"`, "high, normal, low"}},
		{"upper case priority", []string{"--agent", "tool", "--id", "tpb-2", "--priority", "High"}, "", []string{"--priority", "high, normal, low"}},
		{"tenant too long", []string{"--agent", "tool", "--id", "tpb-3", "--tenant", strings.Repeat("x", tasks.MaxTenantLen+1)}, "", []string{"--tenant", "at most 128"}},
		{"tenant control character", []string{"--agent", "tool", "--id", "tpb-4", "--tenant", "a\x1b]0;x\x07"}, "", []string{"--tenant", "control character"}},
		{"tenant zero width space", []string{"--agent", "tool", "--id", "tpb-7", "--tenant", "acme\u200b"}, "", []string{"--tenant", "format character (U+200B"}},
		{"tenant BOM", []string{"--agent", "tool", "--id", "tpb-8", "--tenant", "\ufeffacme"}, "", []string{"--tenant", "format character (U+FEFF"}},
		{"tenant line separator", []string{"--agent", "tool", "--id", "tpb-9", "--tenant", "acme\u2028"}, "", []string{"--tenant", "separator (U+2028"}},
		{"tenant space", []string{"--agent", "tool", "--id", "tpb-10", "--tenant", "acme corp"}, "", []string{"--tenant", "separator (U+0020"}},
		{"file line tenant invisible", []string{"--file", "-"}, `{"id":"tpb-11","agent":"tool","tenant":"acme\u200b"}` + "\n", []string{"line 1:", `field "tenant"`, "U+200B"}},
		{"with --file", []string{"--file", "-", "--tenant", "t"}, "", []string{"--tenant", "own"}},
		{"--max-tokens with --file", []string{"--file", "-", "--max-tokens", "5"}, "", []string{"--max-tokens", `"max_tokens"`}},
		{"--max-cost-usd with --file", []string{"--file", "-", "--max-cost-usd", "0.5"}, "", []string{"--max-cost-usd", `"max_cost_usd"`}},
		{"file line priority", []string{"--file", "-"}, `{"id":"tpb-5","agent":"tool","priority":"LOW"}` + "\n", []string{"line 1:", `field "priority"`}},
		{"file line tenant", []string{"--file", "-"}, `{"id":"tpb-6","agent":"tool","tenant":"a\u0000b"}` + "\n", []string{"line 1:", `field "tenant"`}},
	} {
		_, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append([]string{"--redis", b.url}, tc.args...)...)
		require.Equal(t, ExitUsage, code, "%s: %s", tc.name, errOut)
		for _, s := range tc.errHas {
			require.Contains(t, errOut, s, tc.name)
		}
	}
	for _, id := range []string{"tpb-1", "tpb-2", "tpb-3", "tpb-4", "tpb-5", "tpb-6", "tpb-7", "tpb-8", "tpb-9", "tpb-10", "tpb-11"} {
		ok, err := b.client.Store().Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, id)
	}
}
