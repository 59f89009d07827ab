package restart

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestRepairTickRegistersQueues: a worker registers the queues it serves
// in asynq's set of queues at start and again on every repair tick, so a
// set lost under an idle fleet comes back.
func TestRepairTickRegistersQueues(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := NewScheduler(rdb, tasks.NewClient(rdb))
	r := NewRepairer(s, rdb, InspectorLookup(asynq.NewInspectorFromRedisClient(rdb)), []string{"high", "low"},
		RepairOptions{Holder: "w", Interval: 20 * time.Millisecond})
	ctx := context.Background()
	r.Start(ctx)
	t.Cleanup(r.Stop)
	registered := func() bool {
		got, err := rdb.SMembers(ctx, broker.AllQueues).Result()
		return err == nil && len(got) == 2 && slices.Contains(got, "high") && slices.Contains(got, "low")
	}
	require.Eventually(t, registered, 10*time.Second, 10*time.Millisecond, "registered at start")
	for range 3 {
		require.NoError(t, rdb.Del(ctx, broker.AllQueues).Err())
		require.Eventually(t, registered, 10*time.Second, 10*time.Millisecond, "registered again on a repair tick")
	}
}
