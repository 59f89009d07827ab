package deadline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestSweepWithADeadLetterer: the sweep hands a waiting task past its
// deadline to the DeadLetterer with the state it waited in, then takes
// its run off the queue and drops its entry; it leaves a running task and
// a task not yet past its deadline; it drops an entry without a record;
// a DeadLetterer's error stops the sweep and keeps the entry for the next
// tick. The worker's own DeadLetterer is tested in package worker
// (TestSweepDeadlines).
func TestSweepWithADeadLetterer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	rec := record.NewStore(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	deadline := time.Now().Add(time.Hour)
	for _, id := range []string{"waiting", "running", "later"} {
		dl := deadline
		if id == "later" {
			dl = deadline.Add(time.Hour)
		}
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: "a", Deadline: dl})
		require.NoError(t, err)
	}
	require.NoError(t, rdb.LRem(ctx, broker.PendingKey(tasks.DefaultQueue), 0, "running").Err())
	require.NoError(t, rdb.HSet(ctx, broker.TaskKey(tasks.DefaultQueue, "running"), "state", "active").Err())
	require.NoError(t, rdb.ZAdd(ctx, rkeys.Deadlines(), redis.Z{Score: float64(deadline.UnixMilli()), Member: "ghost"}).Err())

	var mu sync.Mutex
	var fail error
	got := map[string]record.State{}
	dl := func(ctx context.Context, env *tasks.Envelope, waiting record.State) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail != nil {
			return false, fail
		}
		got[env.ID] = waiting
		_, err := rec.Apply(ctx, record.Delivery{ID: env.ID}, record.DeadLettered(record.Attempt{ErrorClass: "timeout"}, "deadline_exceeded"))
		return err == nil, err
	}
	s := New(rdb, rec, insp, restart.NewScheduler(rdb, c), dl, Options{Holder: "w"})

	mu.Lock()
	fail = errors.New("redis trouble")
	mu.Unlock()
	_, err := s.Sweep(ctx, deadline.Add(time.Second))
	require.ErrorContains(t, err, "redis trouble")
	n, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "an error keeps the entries (the ghost's went: it has no record)")

	mu.Lock()
	fail = nil
	mu.Unlock()
	dead, err := s.Sweep(ctx, deadline.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, dead)
	require.Equal(t, map[string]record.State{"waiting": record.StatePending}, got)
	_, err = insp.GetTaskInfo(tasks.DefaultQueue, "waiting")
	require.ErrorIs(t, err, asynq.ErrTaskNotFound, "its run is off the queue")
	left, err := rdb.ZRange(ctx, rkeys.Deadlines(), 0, -1).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"running", "later"}, left)
}
