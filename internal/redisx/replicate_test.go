package redisx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

// withReplica starts a master and a replica of it and waits until the
// replica is in sync.
func withReplica(t *testing.T) (master, replica *redis.Client) {
	t.Helper()
	m, r := redistest.Start(t), redistest.Start(t)
	master, replica = m.Client(), r.Client()
	host, port, _ := strings.Cut(m.Addr, ":")
	require.NoError(t, replica.ReplicaOf(context.Background(), host, port).Err())
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := master.Info(context.Background(), "replication").Result()
		require.NoError(t, err)
		if strings.Contains(info, "state=online") {
			return master, replica
		}
		require.True(t, time.Now().Before(deadline), "replica not in sync: %s", info)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPipelinedReplicatedWaitsOnTheWritingConnection: with a replica the
// calls succeed and are on the replica when they return; without one
// they fail with a *ReplicationError, or, best-effort, report it and
// keep their replies.
func TestPipelinedReplicatedWaitsOnTheWritingConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rep := redisx.Replication{Replicas: 1, Timeout: 2 * time.Second}

	t.Run("with a replica", func(t *testing.T) {
		t.Parallel()
		master, replica := withReplica(t)
		// A flushed script cache: the NOSCRIPT path loads it and waits again.
		require.NoError(t, master.ScriptFlush(ctx).Err())
		calls := []redisx.Call{
			{Script: incr, Keys: []string{"a"}},
			{Cmd: []any{"set", "b", "x"}},
			{Script: incr, Keys: []string{"a"}},
		}
		res := redisx.PipelinedReplicated(ctx, master, calls, rep)
		for i, r := range res {
			require.NoError(t, r.Err, "call %d", i)
		}
		require.EqualValues(t, 2, res[2].Val)
		// WAIT returned: the replica has every write, no polling needed.
		require.Equal(t, "2", replica.Get(ctx, "a").Val())
		require.Equal(t, "x", replica.Get(ctx, "b").Val())

		run := redisx.Replicated(master, rep)
		v, err := run.Run(ctx, incr, []string{"a"})
		require.NoError(t, err)
		require.EqualValues(t, 3, v)
		require.Equal(t, "3", replica.Get(ctx, "a").Val())
	})

	t.Run("without a replica", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Start(t).Client()
		short := redisx.Replication{Replicas: 1, Timeout: 50 * time.Millisecond}
		res := redisx.PipelinedReplicated(ctx, rdb, []redisx.Call{{Script: incr, Keys: []string{"a"}}}, short)
		require.ErrorIs(t, res[0].Err, redisx.ErrNotReplicated)
		var re *redisx.ReplicationError
		require.True(t, errors.As(res[0].Err, &re))
		require.Equal(t, 1, re.Want)
		require.Equal(t, 0, re.Got)
		require.Contains(t, re.Error(), "reached 0 of the 1 replicas")
		require.Equal(t, "1", rdb.Get(ctx, "a").Val(), "the write is on the master all the same")

		var reported []error
		short.OnShort = func(err error) { reported = append(reported, err) }
		res = redisx.PipelinedReplicated(ctx, rdb, []redisx.Call{{Script: incr, Keys: []string{"a"}}}, short)
		require.NoError(t, res[0].Err)
		require.EqualValues(t, 2, res[0].Val)
		require.Len(t, reported, 1)
		require.ErrorIs(t, reported[0], redisx.ErrNotReplicated)

		// A script error is the call's own; no WAIT is blamed on it.
		bad := redis.NewScript(`return redis.error_reply("boom")`)
		res = redisx.PipelinedReplicated(ctx, rdb, []redisx.Call{{Script: bad, Keys: []string{"z"}}}, redisx.Replication{Replicas: 1, Timeout: 10 * time.Millisecond})
		require.ErrorContains(t, res[0].Err, "boom")
		require.NotErrorIs(t, res[0].Err, redisx.ErrNotReplicated)
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Start(t).Client()
		res := redisx.PipelinedReplicated(ctx, rdb, []redisx.Call{{Script: incr, Keys: []string{"a"}}}, redisx.Replication{})
		require.NoError(t, res[0].Err, "no replica needed when none is asked for")
	})
}

// TestPipelinedReplicatedOnCluster: calls whose keys live on different
// masters are each confirmed by their own master's replica, and a batcher
// with replication does the same.
func TestPipelinedReplicatedOnCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.StartCluster(t)
	cc := cl.Client(t)
	var calls []redisx.Call
	masters := map[string]bool{}
	for i := range 12 {
		k := fmt.Sprintf("{k%d}", i)
		masters[cl.MasterOf(t, k)] = true
		calls = append(calls, redisx.Call{Script: incr, Keys: []string{k}})
	}
	require.GreaterOrEqual(t, len(masters), 2)
	rep := redisx.Replication{Replicas: 1, Timeout: 2 * time.Second}
	for i, r := range redisx.PipelinedReplicated(ctx, cc, calls, rep) {
		require.NoError(t, r.Err, "call %d", i)
		require.EqualValues(t, 1, r.Val)
	}
	b := redisx.NewBatcher(cc, redisx.BatchOptions{Replication: rep})
	v, err := b.Run(ctx, incr, []string{"{k0}"})
	require.NoError(t, err)
	require.EqualValues(t, 2, v)
	// Asking for more replicas than a master has fails loudly.
	res := redisx.PipelinedReplicated(ctx, cc, calls[:1], redisx.Replication{Replicas: 2, Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, res[0].Err, redisx.ErrNotReplicated)
}
