package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
	"github.com/agentq/agentq/internal/redistest"
)

// TestDequeueWithoutTenantsIsAsynqs: a fair dequeue of a queue without
// tenants and without a default cap runs the commands asynq's dequeue
// runs, one each, and no other (its EXISTS names the ready set too, so no
// ZRANGE of an empty set): what the no-op floor's Redis CPU counts.
func TestDequeueWithoutTenantsIsAsynqs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	brokertest.Enqueue(t, rdb, "q", broker.Lane{}, "t", 1, time.Now())
	c := broker.NewAsynqClient(rdb, broker.NewWaiter(rdb, []string{"q"}, time.Second, "test"), broker.NewDues(time.Second, time.Now), 1, nil)
	keys := []string{broker.PendingKey("q"), "asynq:{q}:paused", broker.ActiveKey("q"), "asynq:{q}:lease"}
	require.NoError(t, broker.AsynqDequeueScript.Load(ctx, rdb).Err())
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	require.NoError(t, c.EvalSha(ctx, broker.AsynqDequeueScript.Hash(), keys, time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix("q")).Err())
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var nested []string
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") || name == "evalsha" || name == "eval" || strings.HasPrefix(name, "config") || name == "info" {
			continue
		}
		require.True(t, strings.HasPrefix(rest, "calls=1,"), l)
		nested = append(nested, name)
	}
	require.ElementsMatch(t, []string{"exists", "rpoplpush", "hset", "hdel", "zadd", "hget"}, nested)
}
