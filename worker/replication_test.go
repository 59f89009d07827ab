package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/tasks"
)

// TestShortReplicationIsBestEffort: with redis.wait_replicas 1 and no
// replica, the worker's writes wait wait_timeout, are counted as short,
// and the outcome stands: the task succeeds (an enqueue, by contrast, is
// refused; see e2e TestWaitReplicasRefusesEnqueue).
func TestShortReplicationIsBestEffort(t *testing.T) {
	t.Parallel()
	var c calls
	w, rdb := runWorkerRedis(t, "wait_replicas: 1, wait_timeout: 20ms", "", WithAgent("ok", fixedAgent(&c, nil)))
	ids := enqueueN(t, rdb, "ok", 3) // a client without WithWaitReplicas: no WAIT at enqueue
	views := waitTerminal(t, rdb, ids, 30*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateSucceeded, views[id].State)
	}
	require.Len(t, c.all(), 3)
	// One WAIT per flush: the three outcomes may share one (group commit).
	require.GreaterOrEqual(t, counterValue(t, w, "agentq_replication_short_total", nil), 1.0,
		"the outcome writes were short of their replica")
}
