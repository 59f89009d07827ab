package wake

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestChecksNudgeOnlyWorkWithoutToken: the fleet's look pushes one wake
// token for a queue with a pending task and no token, none while a token
// waits, none for an empty or a paused queue, and makes the forwarder
// check the queue's delayed sets at its next tick.
func TestChecksNudgeOnlyWorkWithoutToken(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const q = "default"
	pushed := func() bool {
		ok, err := broker.Nudge(ctx, rdb, q)
		require.NoError(t, err)
		return ok
	}
	require.False(t, pushed(), "an empty queue")
	require.NoError(t, rdb.LPush(ctx, broker.PendingKey(q), "t1").Err())
	require.True(t, pushed(), "work without a token")
	require.False(t, pushed(), "a token already waits")
	require.EqualValues(t, 1, rdb.LLen(ctx, rkeys.Wake(q)).Val())
	require.NoError(t, rdb.Del(ctx, rkeys.Wake(q)).Err())
	require.NoError(t, rdb.Set(ctx, broker.PausedKey(q), "1", 0).Err())
	require.False(t, pushed(), "a paused queue")

	// One look of the fleet's job: the forwarder checks again.
	dues := broker.NewDues(time.Hour, time.Now)
	for _, set := range []string{broker.ScheduledKey(q), broker.RetryKey(q)} {
		require.True(t, dues.Begin(set, time.Now().Unix()))
		dues.Done(set, -1, true)
		require.False(t, dues.Begin(set, time.Now().Unix()), "known empty, checked a moment ago")
	}
	e := Checks(rdb, dues, []string{q}, time.Hour, "w1")
	e.Tick(ctx)
	for _, set := range []string{broker.ScheduledKey(q), broker.RetryKey(q)} {
		require.True(t, dues.Begin(set, time.Now().Unix()), "the fleet's look makes the forwarder ask")
	}
}
