package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestInspectorRequeueRun (#23 item 9): `inspector dlq requeue ID --run N`
// requeues the dead letter only while it is run N (dlq show prints it):
// another run is exit 1 naming both, and nothing is requeued. --run
// without exactly one ID is a usage error.
func TestInspectorRequeueRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	dlq := deadletter.NewStore(rdb)
	_, err := dlq.Put(ctx, &deadletter.Entry{ID: "rr", Agent: "tool", ErrorClass: "logic_error", Error: "boom",
		Reason: deadletter.ReasonNotRetryable, Attempts: 1, Queue: "default", Run: 3, DeadLetteredAt: time.Now()})
	require.NoError(t, err)
	base := []string{"--redis", srv.URL(), "dlq"}

	out, errOut, code := runCmd(t, NewInspectorCmd, "", append(base, "show", "rr")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `Run:\s+3`, out)

	_, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, "requeue", "rr", "--run", "2")...)
	require.Equal(t, ExitFailure, code, errOut)
	require.Contains(t, errOut, "run 3, not run 2")
	_, err = dlq.Get(ctx, "rr")
	require.NoError(t, err, "not requeued")

	for _, args := range [][]string{{"requeue", "rr", "other", "--run", "3"}, {"requeue", "--all", "--run", "3"}, {"requeue", "rr", "--run", "-4"}} {
		_, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, args...)...)
		require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
	}

	out, errOut, code = runCmd(t, NewInspectorCmd, "", append(base, "requeue", "rr", "--run", "3")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "rr\n", out)
	v, err := tasks.NewStore(rdb).Get(ctx, "rr")
	require.NoError(t, err)
	require.Equal(t, 4, v.Run)
}
