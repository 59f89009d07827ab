package wakeup_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/wakeup"
)

// TestRunScriptWritesAsynqs: RunCall (agentq_run, RunLua) writes exactly
// what asynq's own enqueue and schedule scripts write (asynqcompat's
// copies, which TestMatchesAsynqClient holds to asynq.Client), plus the
// wake-up token, and refuses a task ID that exists as they do;
// RunCommands (a new ID's MULTI/EXEC) writes what RunCall writes.
func TestRunScriptWritesAsynqs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, got, cmds := redistest.Start(t).Client(), redistest.Start(t).Client(), redistest.Start(t).Client()
	now := time.Now()
	ts := []asynqcompat.Task{
		{Type: "agentq:task", Payload: []byte(`{"id":"a"}`), ID: "a#0", Queue: "default", MaxRetry: 1 << 30, Timeout: 24 * time.Hour},
		{Type: "agentq:task", Payload: []byte(`{"id":"b"}`), ID: "b#0", Queue: "critical", MaxRetry: 1 << 30, Timeout: 24 * time.Hour},
	}
	for _, delay := range []time.Duration{0, time.Hour} {
		for _, tk := range ts {
			for i := range 2 { // the second write of an ID is refused
				ref := asynqcompat.Enqueue(tk, now)
				if delay > 0 {
					ref = asynqcompat.Schedule(tk, now.Add(delay))
				}
				n1, err := ref.Script.Run(ctx, want, ref.Keys, ref.Args...).Int()
				require.NoError(t, err)
				c := wakeup.RunCall(tk, now, delay, true)
				n2, err := c.Script.Run(ctx, got, c.Keys, c.Args...).Int()
				require.NoError(t, err)
				require.Equal(t, n1, n2)
				require.Equal(t, 1-i, n2)
				if i == 0 {
					_, err := cmds.TxPipelined(ctx, func(p redis.Pipeliner) error {
						for _, cmd := range wakeup.RunCommands(tk, now, delay) {
							p.Do(ctx, cmd...)
						}
						return nil
					})
					require.NoError(t, err)
				}
			}
		}
		ts[0].ID, ts[1].ID = "c#0", "d#0"
	}
	require.Equal(t, redistest.Dump(t, got), redistest.Dump(t, cmds), "RunCommands writes what RunCall writes")
	for _, q := range []string{"default", "critical"} {
		n, err := got.LLen(ctx, rkeys.Wake(q)).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "one token per pending task written, none for refused or scheduled ones")
		require.NoError(t, got.Del(ctx, rkeys.Wake(q)).Err())
	}
	require.Equal(t, redistest.Dump(t, want, "pending_since"), redistest.Dump(t, got, "pending_since"))
}
