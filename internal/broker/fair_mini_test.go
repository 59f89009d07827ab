package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
)

// TestFairOnMiniredis: the embedded demo runs on miniredis, so the fair
// scripts (LMPOP, ZADD NX, the release in asynq's done) must run there
// too: priorities, a cap and its release.
func TestFairOnMiniredis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	w := broker.NewWaiter(rdb, []string{fairQ}, 10*time.Millisecond, "w1")
	c := broker.NewAsynqClient(rdb, w, broker.NewDues(time.Second, time.Now), 1, nil)
	c.Fair = broker.FairConfig{Named: map[string]broker.TenantSettings{"a": {Concurrency: 1}}}
	b := &fairBundle{t: t, ctx: context.Background(), rdb: rdb, c: c}
	require.NoError(t, broker.PublishFair(b.ctx, rdb, fairQ, c.Fair))
	normal := b.enqueue(broker.Lane{Tenant: "a"}, 2)
	high := b.enqueue(broker.Lane{Tenant: "a", Priority: broker.High}, 1)
	require.Equal(t, high[0], b.dequeue())
	require.Equal(t, "", b.dequeue())
	b.done(high[0])
	require.Equal(t, normal[0], b.dequeue())
}
