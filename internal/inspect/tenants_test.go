package inspect_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/broker/brokertest"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/redistest"
)

// TestTenants: inspect.Tenants shows each tenant of each queue with its
// runs waiting in its lanes (the default tenant's in asynq's pending
// list), in flight (acme at its cap of 2), its cap and weight from the
// config, and its oldest waiting run; stats count the lanes in pending.
func TestTenants(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	want := brokertest.Seed(t, rdb, "default")
	brokertest.Enqueue(t, rdb, "other", broker.Lane{Tenant: "zed"}, "zed", 1, time.Now())
	cfg, err := config.Parse([]byte(brokertest.YAML), "test.yaml")
	require.NoError(t, err)

	got, err := inspect.Tenants(ctx, rdb, cfg, "")
	require.NoError(t, err)
	var names []string
	for _, tn := range got {
		names = append(names, tn.Queue+"/"+tn.Tenant)
	}
	require.Equal(t, []string{"default/", "default/acme", "default/beta", "other/", "other/zed"}, names)
	for _, tn := range got[:3] {
		require.Equal(t, want[tn.Tenant].Pending, tn.Pending, "pending of %q", tn.Tenant)
		require.Equal(t, want[tn.Tenant].InFlight, tn.InFlight, "in flight of %q", tn.Tenant)
	}
	acme := got[1]
	require.Equal(t, 2, acme.Concurrency)
	require.Equal(t, 3.0, acme.Weight)
	require.True(t, acme.Capped, "acme waits at its cap")
	require.NotNil(t, acme.OldestWaiting)
	require.WithinDuration(t, time.Now().Add(-time.Hour), *acme.OldestWaiting, 5*time.Minute, "acme's oldest run waits since an hour ago")
	require.Equal(t, 1.0, got[2].Weight, "beta takes defaults.tenant")
	require.False(t, got[2].Capped)
	require.Equal(t, map[string]int64{"low": want["beta"].Pending}, got[2].ByPrio)

	none, err := inspect.Tenants(ctx, rdb, cfg, "nope")
	require.NoError(t, err)
	require.Empty(t, none, "a queue asynq does not know has no tenants")

	only, err := inspect.Tenants(ctx, rdb, cfg, "other")
	require.NoError(t, err)
	require.Len(t, only, 2)
	require.Equal(t, int64(1), only[1].Pending)
	require.Equal(t, int64(0), only[0].Pending, "the default tenant of a queue without its runs")

	// A queue without tenants: the dequeue does not count the default
	// tenant's runs, yet they are in flight.
	brokertest.Enqueue(t, rdb, "plain", broker.Lane{}, "p", 3, time.Now())
	require.NotEmpty(t, brokertest.Dequeue(t, rdb, "plain", broker.FairConfig{}))
	require.NotEmpty(t, brokertest.Dequeue(t, rdb, "plain", broker.FairConfig{}))
	plain, err := inspect.Tenants(ctx, rdb, cfg, "plain")
	require.NoError(t, err)
	require.Len(t, plain, 1)
	require.Equal(t, int64(1), plain[0].Pending)
	require.Equal(t, int64(2), plain[0].InFlight, "the default tenant's uncounted runs in flight")

	qs, err := inspect.Queues(rdb)
	require.NoError(t, err)
	require.Len(t, qs, 3)
	qs = []inspect.QueueStats{qs[0], qs[2]} // default, other
	inLanes := want["acme"].Pending + want["beta"].Pending
	require.Equal(t, inLanes, qs[0].PendingInLanes)
	require.Equal(t, int(inLanes+want[""].Pending), qs[0].Pending, "pending counts the runs in tenants' lanes")
	require.Equal(t, 3, qs[0].Tenants)
	require.Equal(t, 1, qs[1].Tenants, "zed; the default tenant has no work on other")
	require.Equal(t, 1, qs[1].Pending)
}

// TestTenantsRoundTrips: a queue with 1,000 tenants is read in three
// round trips, handshakes aside (the registry, one pipeline of the lanes and counts, one of
// the oldest runs).
func TestTenantsRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	for i := range 1000 {
		brokertest.Enqueue(t, rdb, "default", broker.Lane{Tenant: fmt.Sprintf("t%04d", i)}, fmt.Sprintf("t%04d", i), 1, time.Now())
	}
	var trips readTrips
	rdb.AddHook(&trips)
	ts, err := broker.Tenants(context.Background(), rdb, "default", broker.FairConfig{})
	require.NoError(t, err)
	require.Len(t, ts, 1001)
	for _, tn := range ts[1:] {
		require.Equal(t, int64(1), tn.Pending)
		require.NotNil(t, tn.OldestWaiting)
	}
	require.Equal(t, int64(3), trips.n.Load())
}

// readTrips counts a client's round trips, but for a new connection's
// handshake (HELLO, CLIENT SETINFO).
type readTrips struct{ n atomic.Int64 }

func (r *readTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *readTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *readTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "client" {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}
