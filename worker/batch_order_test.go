package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueueManyHistoryStartsQueued: tasks enqueued in one batch while a
// worker already runs (a quick agent, 10 slots) each have a history that
// starts with the producer's queued event (seq 1) and ends with their
// success: no worker takes a run before its record holds the queued event.
// (Before, EnqueueMany queued the runs and wrote the records after, so a
// fast worker's success came before "queued" in the history.)
func TestEnqueueManyHistoryStartsQueued(t *testing.T) {
	t.Parallel()
	_, rdb := runWorker(t, "worker: {concurrency: 10, shutdown_timeout: 2s}\nagents:\n  tool: {}\n",
		WithAgent("tool", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		})))
	const n = 300
	ts := make([]tasks.Task, n)
	for i := range ts {
		ts[i] = tasks.Task{Agent: "tool"}
		if i%2 == 0 {
			ts[i].ID = fmt.Sprintf("batch-%03d", i) // caller IDs and generated ones
		}
	}
	c := tasks.NewClient(rdb)
	res, err := c.EnqueueMany(context.Background(), ts)
	require.NoError(t, err)
	for _, r := range res {
		require.False(t, r.Duplicate, r.ID)
		v := waitState(t, rdb, r.ID, 60*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateSucceeded, v.State, r.ID)
		require.GreaterOrEqual(t, len(v.History), 2, r.ID)
		require.Equal(t, tasks.EventQueued, v.History[0].Event, "%s: %v", r.ID, eventsOf(v))
		require.EqualValues(t, 1, v.History[0].Seq, r.ID)
		require.Equal(t, tasks.EventSucceeded, v.History[len(v.History)-1].Event, "%s: %v", r.ID, eventsOf(v))
	}
	// A second batch of the same caller IDs: duplicates, with their state.
	res, err = c.EnqueueMany(context.Background(), ts[:4])
	require.NoError(t, err)
	require.True(t, res[0].Duplicate)
	require.Equal(t, tasks.StateSucceeded, res[0].State)
	require.True(t, res[2].Duplicate)
	require.False(t, res[1].Duplicate, "a generated ID is new each time")
}
