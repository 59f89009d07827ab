package inspect_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// pageAll pages through the listing f selects and returns the IDs in the
// order listed, failing on a repeat, and how many requests it took.
func pageAll(t *testing.T, rdb redisClient, f inspect.TaskFilter) ([]string, int) {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for n := 1; ; n++ {
		page, err := inspect.Tasks(context.Background(), rdb, f)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Tasks), max(f.Limit, 1))
		for _, tk := range page.Tasks {
			require.False(t, seen[tk.ID], "task %s listed twice", tk.ID)
			require.Nil(t, tk.History)
			seen[tk.ID] = true
			ids = append(ids, tk.ID)
		}
		if page.NextCursor == "" {
			return ids, n
		}
		require.Less(t, n, 10000, "the listing does not end")
		f.Cursor = page.NextCursor
	}
}

type redisClient = redis.UniversalClient

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

func sortedCopy(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

// TestTasksPagesThrough10000Pending: 10,000 pending tasks (batch enqueue,
// no worker) are listed exactly once each, by queue, state, agent and
// correlation ID, in pages with a cursor; a filter that selects few tasks
// reads at most ScanBudget entries a request (short pages, more requests).
func TestTasksPagesThrough10000Pending(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	const n = 10000
	for b := 0; b < n; b += 1000 {
		batch := make([]tasks.Task, 0, 1000)
		for i := b; i < b+1000; i++ {
			// Spread over tenants and priorities: most wait in the
			// tenants' lanes (internal/broker), not asynq's pending list.
			batch = append(batch, tasks.Task{ID: fmt.Sprintf("t%05d", i), Agent: []string{"a", "b"}[i%2],
				Queue: "bulk", CorrelationID: fmt.Sprintf("c%d", i%10),
				Tenant: []string{"", "x", "", "y"}[i%4], Priority: []string{"", "high", "low"}[(i/4)%3]})
		}
		_, err := c.EnqueueMany(ctx, batch)
		require.NoError(t, err)
	}
	_, err := c.Enqueue(ctx, tasks.Task{ID: "elsewhere", Agent: "a", CorrelationID: "c3"})
	require.NoError(t, err)

	ids, _ := pageAll(t, rdb, inspect.TaskFilter{Queue: "bulk", States: []record.State{record.StatePending}, Limit: 700})
	require.Len(t, ids, n)
	ids, _ = pageAll(t, rdb, inspect.TaskFilter{Limit: 1000})
	require.Len(t, ids, n+1)

	ids, _ = pageAll(t, rdb, inspect.TaskFilter{Queue: "bulk", Tenant: "x", Limit: 500})
	require.Len(t, ids, n/4)

	ids, _ = pageAll(t, rdb, inspect.TaskFilter{Queue: "bulk", Agent: "b", Limit: 333})
	require.Len(t, ids, n/2)
	for _, id := range ids {
		var i int
		_, _ = fmt.Sscanf(id, "t%05d", &i)
		require.Equal(t, 1, i%2, id)
	}

	ids, reqs := pageAll(t, rdb, inspect.TaskFilter{CorrelationID: "c3", Limit: 1000})
	require.Len(t, ids, n/10+1)
	require.Contains(t, ids, "elsewhere")
	require.GreaterOrEqual(t, reqs, n/inspect.ScanBudget, "a request read more than ScanBudget entries")

	// A filter nothing matches still ends, a bounded scan at a time.
	ids, reqs = pageAll(t, rdb, inspect.TaskFilter{Agent: "nobody", Limit: 10})
	require.Empty(t, ids)
	require.GreaterOrEqual(t, reqs, n/inspect.ScanBudget)
}

func TestTasksStatesAndCursor(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(ctx, tasks.Task{ID: "now", Agent: "a"})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err = c.Enqueue(ctx, tasks.Task{ID: fmt.Sprintf("later%d", i), Agent: "a"}, tasks.ProcessIn(time.Hour))
		require.NoError(t, err)
	}
	// A retry with no agentq record (asynq's own) and a restart waiting.
	require.NoError(t, rdb.ZAdd(ctx, broker.RetryKey("default"), redisZ(1, "plain")).Err())
	require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redisZ(2, "gone")).Err())

	ids, _ := pageAll(t, rdb, inspect.TaskFilter{States: []record.State{record.StateScheduled}, Limit: 2})
	require.Equal(t, []string{"later0", "later1", "later2", "later3", "later4"}, sortedCopy(ids))

	page, err := inspect.Tasks(ctx, rdb, inspect.TaskFilter{States: inspect.ParseStates("retrying,deferred,restarting")})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 2)
	require.Equal(t, "plain", page.Tasks[0].ID)
	require.Equal(t, record.StateRetrying, page.Tasks[0].ListedAs)
	require.Equal(t, "default", page.Tasks[0].Queue)
	require.Equal(t, record.StateRestarting, page.Tasks[1].ListedAs)

	page, err = inspect.Tasks(ctx, rdb, inspect.TaskFilter{States: []record.State{record.StatePending}})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	require.Equal(t, "a", page.Tasks[0].Agent)
	require.Equal(t, record.StatePending, page.Tasks[0].State)
	require.Empty(t, page.NextCursor)

	_, err = inspect.Tasks(ctx, rdb, inspect.TaskFilter{Cursor: "not-a-cursor"})
	require.ErrorIs(t, err, inspect.ErrBadCursor)
	_, err = inspect.Tasks(ctx, rdb, inspect.TaskFilter{States: []record.State{record.StateSucceeded}})
	require.ErrorIs(t, err, inspect.ErrBadFilter)
	_, err = inspect.Tasks(ctx, rdb, inspect.TaskFilter{Limit: inspect.MaxTaskLimit + 1})
	require.ErrorIs(t, err, inspect.ErrBadFilter)
}

func TestPauseResumeQueue(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	_, err := tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: "held", Agent: "a"})
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, rkeys.Wake("default")).Err())

	res, err := inspect.PauseQueue(ctx, rdb, "default", nil)
	require.NoError(t, err)
	require.Equal(t, inspect.PauseResult{Queue: "default", Paused: true, Changed: true}, res)
	res, err = inspect.PauseQueue(ctx, rdb, "default", nil)
	require.NoError(t, err)
	require.False(t, res.Changed)
	qs, err := inspect.Queues(rdb)
	require.NoError(t, err)
	require.True(t, qs[0].Paused)
	require.Equal(t, 1, qs[0].Pending, "paused work is held")

	_, err = inspect.PauseQueue(ctx, rdb, "nope", nil)
	require.ErrorIs(t, err, inspect.ErrUnknownQueue)
	res, err = inspect.PauseQueue(ctx, rdb, "configured", []string{"configured"})
	require.NoError(t, err)
	require.True(t, res.Changed)

	res, err = inspect.ResumeQueue(ctx, rdb, "default", nil)
	require.NoError(t, err)
	require.Equal(t, inspect.PauseResult{Queue: "default", Changed: true}, res)
	qs, err = inspect.Queues(rdb)
	require.NoError(t, err)
	require.False(t, qs[0].Paused)
	require.EqualValues(t, 1, rdb.LLen(ctx, rkeys.Wake("default")).Val(), "resume wakes a worker per held task")
	res, err = inspect.ResumeQueue(ctx, rdb, "default", nil)
	require.NoError(t, err)
	require.False(t, res.Changed)
}
