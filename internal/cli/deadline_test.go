package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEnqueuerDeadline: `enqueuer --deadline D|TIME` (and "deadline" on a
// --file line) gives the task its deadline; a bad, past or impossible
// one is exit 2 naming it, with nothing enqueued.
func TestEnqueuerDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for id, d := range map[string]string{"dl-1": "30s", "dl-2": at.Format(time.RFC3339)} {
		out, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--agent", "tool", "--id", id, "--deadline", d)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, id, strings.TrimSpace(out))
	}
	_, errOut, code := runCmd(t, NewEnqueuerCmd, `{"id":"dl-3","agent":"tool","deadline":"1h"}`+"\n", "--redis", b.url, "--file", "-")
	require.Equal(t, 0, code, errOut)
	for id, want := range map[string]time.Time{"dl-1": time.Now().Add(30 * time.Second), "dl-2": at, "dl-3": time.Now().Add(time.Hour)} {
		v, err := b.client.Store().Get(ctx, id)
		require.NoError(t, err)
		got, err := time.Parse(time.RFC3339Nano, v.Deadline)
		require.NoError(t, err, "%s shows its deadline", id)
		require.WithinDuration(t, want, got, 10*time.Second, id)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		errHas []string
	}{
		{"not a deadline", []string{"--agent", "tool", "--id", "bad-1", "--deadline", "soon"}, "", []string{"--deadline", "neither a Go duration"}},
		{"past", []string{"--agent", "tool", "--id", "bad-2", "--deadline", "2001-01-01T00:00:00Z"}, "", []string{"--deadline", "already past"}},
		{"zero", []string{"--agent", "tool", "--id", "bad-3", "--deadline", "0s"}, "", []string{"--deadline", "already past"}},
		{"before the first run", []string{"--agent", "tool", "--id", "bad-4", "--deadline", "1m", "--in", "1h"}, "", []string{"--deadline", "first run"}},
		{"with --file", []string{"--file", "-", "--deadline", "1m"}, "", []string{"--deadline", "own"}},
		{"file line", []string{"--file", "-"}, `{"id":"bad-5","agent":"tool","deadline":"-1s"}` + "\n", []string{"line 1:", `field "deadline"`}},
	} {
		_, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append([]string{"--redis", b.url}, tc.args...)...)
		require.Equal(t, ExitUsage, code, "%s: %s", tc.name, errOut)
		for _, s := range tc.errHas {
			require.Contains(t, errOut, s, tc.name)
		}
	}
	for _, id := range []string{"bad-1", "bad-2", "bad-3", "bad-4", "bad-5"} {
		ok, err := b.client.Store().Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, id)
	}
}
