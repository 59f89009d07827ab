package deadletter_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// requeuedEvents counts the "requeued" events of task id's history.
func requeuedEvents(t *testing.T, st *tasks.Store, id string) int {
	t.Helper()
	hist, err := st.History(context.Background(), id)
	require.NoError(t, err)
	n := 0
	for _, ev := range hist {
		if ev.Event == tasks.EventRequeued {
			n++
		}
	}
	return n
}

// queued is every asynq task of the default queue (pending or scheduled).
func queued(t *testing.T, insp *asynq.Inspector) []string {
	t.Helper()
	var ids []string
	pending, err := insp.ListPendingTasks(tasks.DefaultQueue)
	require.NoError(t, err)
	for _, ti := range pending {
		ids = append(ids, ti.ID)
	}
	return ids
}

// TestRequeueConcurrentOnce (#23 item 9): 20 concurrent requeues of one
// dead letter, on a real redis-server: exactly one succeeds; every other
// one fails with ErrConflict (being requeued) or ErrNotFound (gone) and
// writes nothing; the history gains exactly one "requeued" event and the
// task is on its queue once. The claim is released: no claim key is left.
func TestRequeueConcurrentOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	st := tasks.NewStore(rdb)
	deadTask(t, rdb, s, "race-1")

	const n = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.RequeueTask(ctx, tasks.NewClient(rdb), "race-1")
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, deadletter.ErrConflict), errors.Is(err, deadletter.ErrNotFound):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, ok, "exactly one requeue succeeds: %v", errs)
	require.Equal(t, 1, requeuedEvents(t, st, "race-1"), "exactly one requeued event")
	require.Equal(t, []string{"race-1#1"}, queued(t, asynq.NewInspectorFromRedisClient(rdb)), "the task is queued once")
	v, err := st.Get(ctx, "race-1")
	require.NoError(t, err)
	require.Equal(t, 1, v.Run)
	require.Equal(t, tasks.StatePending, v.State)
	_, err = s.Get(ctx, "race-1")
	require.ErrorIs(t, err, deadletter.ErrNotFound)
	left, err := rdb.Exists(ctx, rkeys.DLQRequeueClaim("race-1")).Result()
	require.NoError(t, err)
	require.Zero(t, left, "the claim is released")

	// A requeue now: the dead letter is gone.
	_, err = s.RequeueTask(ctx, tasks.NewClient(rdb), "race-1")
	require.ErrorIs(t, err, deadletter.ErrNotFound)
	require.Equal(t, 1, requeuedEvents(t, st, "race-1"))
}

// TestRequeueStaleRun (#23 item 9): a requeue naming the run it saw is
// refused with a *ConflictError once the dead letter is another run (the
// task was requeued and died again): nothing is written, the newer dead
// letter stays. Naming the right run requeues it.
func TestRequeueStaleRun(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	st := tasks.NewStore(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	e := deadTask(t, rdb, s, "stale-1")
	require.Equal(t, 0, e.Run)

	_, err := s.RequeueTaskRun(ctx, tasks.NewClient(rdb), "stale-1", 0)
	require.NoError(t, err)
	// Run 1 ran (taken off its queue) and died again: a new dead letter.
	require.NoError(t, insp.DeleteTask(tasks.DefaultQueue, "stale-1#1"))
	e.Run, e.Error = 1, "bad again"
	_, err = s.Put(ctx, e)
	require.NoError(t, err)
	before := redistest.Dump(t, rdb)

	// A late click on the page that showed run 0.
	_, err = s.RequeueTaskRun(ctx, tasks.NewClient(rdb), "stale-1", 0)
	var ce *deadletter.ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, deadletter.ErrConflict)
	require.Equal(t, 1, ce.Run)
	require.Equal(t, 0, ce.Want)
	require.Contains(t, err.Error(), "run 1, not run 0")
	require.Equal(t, before, redistest.Dump(t, rdb), "nothing was written")
	require.Empty(t, queued(t, insp))

	// Naming run 1 requeues it as run 2.
	_, err = s.RequeueTaskRun(ctx, tasks.NewClient(rdb), "stale-1", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"stale-1#2"}, queued(t, insp))
	require.Equal(t, 2, requeuedEvents(t, st, "stale-1"))
}
