package wakeup_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/fair"
	"github.com/agentq/agentq/internal/wakeup"
)

// TestFairOnMiniredis: the embedded demo runs on miniredis, so the fair
// scripts (LMPOP, ZADD NX, the release in asynq's done) must run there
// too: priorities, a cap and its release.
func TestFairOnMiniredis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	w := wakeup.NewWaiter(rdb, []string{fairQ}, 10*time.Millisecond, "w1")
	c := wakeup.NewAsynqClient(rdb, w, wakeup.NewDues(time.Second, time.Now), 1, nil)
	c.Fair = fair.Config{Named: map[string]fair.Settings{"a": {Concurrency: 1}}}
	b := &fairBundle{t: t, ctx: context.Background(), rdb: rdb, c: c}
	require.NoError(t, fair.Publish(b.ctx, rdb, fairQ, c.Fair))
	normal := b.enqueue(fair.Lane{Tenant: "a"}, 2)
	high := b.enqueue(fair.Lane{Tenant: "a", Priority: fair.High}, 1)
	require.Equal(t, high[0], b.dequeue())
	require.Equal(t, "", b.dequeue())
	b.done(high[0])
	require.Equal(t, normal[0], b.dequeue())
}
