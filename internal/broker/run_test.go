package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestRunScriptWritesAsynqs: RunCall (agentq_run, RunLua) writes exactly
// what asynq's own enqueue and schedule scripts write (broker's
// copies, which TestMatchesAsynqClient holds to asynq.Client), plus the
// wake-up token, and refuses a task ID that exists as they do.
func TestRunScriptWritesAsynqs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, got := redistest.Start(t).Client(), redistest.Start(t).Client()
	now := time.Now()
	ts := []broker.AsynqTask{
		{Type: "agentq:task", Payload: []byte(`{"id":"a"}`), ID: "a#0", Queue: "default", MaxRetry: 1 << 30, Timeout: 24 * time.Hour},
		{Type: "agentq:task", Payload: []byte(`{"id":"b"}`), ID: "b#0", Queue: "critical", MaxRetry: 1 << 30, Timeout: 24 * time.Hour},
	}
	for _, delay := range []time.Duration{0, time.Hour} {
		for _, tk := range ts {
			for i := range 2 { // the second write of an ID is refused
				ref := broker.AsynqEnqueue(tk, now)
				if delay > 0 {
					ref = broker.AsynqSchedule(tk, now.Add(delay))
				}
				n1, err := ref.Script.Run(ctx, want, ref.Keys, ref.Args...).Int()
				require.NoError(t, err)
				c := broker.RunCall(tk, broker.Lane{}, now, delay, true)
				n2, err := c.Script.Run(ctx, got, c.Keys, c.Args...).Int()
				require.NoError(t, err)
				require.Equal(t, n1, n2)
				require.Equal(t, 1-i, n2)
			}
		}
		ts[0].ID, ts[1].ID = "c#0", "d#0"
	}
	for _, q := range []string{"default", "critical"} {
		n, err := got.LLen(ctx, rkeys.Wake(q)).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "one token per pending task written, none for refused or scheduled ones")
		require.NoError(t, got.Del(ctx, rkeys.Wake(q)).Err())
	}
	require.Equal(t, redistest.Dump(t, want, "pending_since"), redistest.Dump(t, got, "pending_since"))
}

// TestRunLaneWrites: a run of a lane other than the default waits in its
// lane, its task hash names the lane, and its tenant joins the ready set
// and the registry (a scheduled run joins at its forward).
func TestRunLaneWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	got := redistest.Start(t).Client()
	now := time.Now()
	lanes := []broker.Lane{{Tenant: "acme"}, {Tenant: "acme", Priority: broker.Low}, {Priority: broker.High}}
	for i, lane := range lanes {
		for _, delay := range []time.Duration{0, time.Hour} {
			tk := broker.AsynqTask{Type: "agentq:task", Payload: []byte(`{}`), ID: fmt.Sprintf("t%d-%d#0", i, delay), Queue: "q",
				MaxRetry: 1, Timeout: time.Hour}
			c := broker.RunCall(tk, lane, now, delay, false)
			require.NoError(t, c.Script.Run(ctx, got, c.Keys, c.Args...).Err())
		}
	}
	require.Equal(t, []string{"t0-0#0"}, got.LRange(ctx, rkeys.FairLane("q", "n", "acme"), 0, -1).Val())
	require.Equal(t, []string{"t1-0#0"}, got.LRange(ctx, rkeys.FairLane("q", "l", "acme"), 0, -1).Val())
	require.Equal(t, []string{"t2-0#0"}, got.LRange(ctx, rkeys.FairLane("q", "h", ""), 0, -1).Val())
	require.Zero(t, got.LLen(ctx, broker.PendingKey("q")).Val(), "no lane run in asynq's pending list")
	require.ElementsMatch(t, []string{"acme", ""}, got.ZRange(ctx, rkeys.FairReady("q"), 0, -1).Val())
	require.Equal(t, []any{"acme", "l"}, got.HMGet(ctx, broker.TaskKey("q", "t1-3600000000000#0"), broker.FieldTenant, broker.FieldPriority).Val(),
		"a scheduled run's task hash names its lane, for its forward")
}
