package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// deadTask creates task id's record and dead-letters it (record and entry).
func deadTask(t *testing.T, rdb redis.UniversalClient, s *deadletter.Store, id string) *deadletter.Entry {
	t.Helper()
	ctx := context.Background()
	st := record.NewStore(rdb)
	env := &tasks.Envelope{ID: id, Agent: "llm", Action: "chat", Queue: tasks.DefaultQueue, CorrelationID: "c-" + id, EnqueuedAt: base}
	_, err := st.Create(ctx, record.New{ID: id, Seed: record.SeedOf(env), State: tasks.StatePending})
	require.NoError(t, err)
	_, err = st.Apply(ctx, record.Delivery{ID: id, Attempt: 1}, record.DeadLettered(record.Attempt{Attempt: 1, Agent: "llm",
		ErrorClass: "invalid_request", ClassifiedBy: "status", Error: "bad"}, deadletter.ReasonNotRetryable))
	require.NoError(t, err)
	hist, err := st.History(ctx, id)
	require.NoError(t, err)
	e := &deadletter.Entry{ID: id, Agent: "llm", Action: "chat", CorrelationID: "c-" + id, ErrorClass: "invalid_request",
		ClassifiedBy: "status", Error: "bad", Reason: deadletter.ReasonNotRetryable, Attempts: 1, DeadLetteredAt: time.Now().UTC(),
		History: hist, Queue: tasks.DefaultQueue, EnqueuedAt: base}
	_, err = s.Put(ctx, e)
	require.NoError(t, err)
	return e
}

// TestRequeueTaskEnqueuesFirst (#11 item 5): a requeue whose enqueue fails
// (here for real: a Redis user not allowed asynq's keys) changes nothing:
// the record still says dead_lettered and the dead letter stays.
func TestRequeueTaskEnqueuesFirst(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	deadTask(t, rdb, s, "rq-1")

	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "noasynq", "on", ">pw", "~agentq:*", "&*", "+@all").Err())
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noasynq", Password: "pw"})
	t.Cleanup(func() { _ = limited.Close() })

	_, err := deadletter.NewStore(limited).RequeueTask(ctx, tasks.NewClient(limited), "rq-1")
	require.ErrorContains(t, err, "NOPERM")
	v, err := tasks.NewStore(rdb).Get(ctx, "rq-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateDeadLettered, v.State, "a failed enqueue leaves the record as it was")
	require.Equal(t, 0, v.Run)
	_, err = s.Get(ctx, "rq-1")
	require.NoError(t, err, "the dead letter stays")

	// With a user that may enqueue, the same requeue works.
	_, err = s.RequeueTask(ctx, tasks.NewClient(rdb), "rq-1")
	require.NoError(t, err)
	v, err = tasks.NewStore(rdb).Get(ctx, "rq-1")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)
	require.Equal(t, 1, v.Run)
}

// TestRequeueTaskRebuildsExpiredRecord (#11 item 5): requeueing a dead
// letter whose task record has expired rebuilds the record (agent, id,
// action, queue, history from the dead letter) instead of leaving a
// record with only a state.
func TestRequeueTaskRebuildsExpiredRecord(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	e := deadTask(t, rdb, s, "rq-2")
	require.NoError(t, rdb.Del(ctx, rkeys.Task("rq-2"), rkeys.TaskHistory("rq-2")).Err()) // the record expired

	_, err := s.RequeueTask(ctx, tasks.NewClient(rdb), "rq-2")
	require.NoError(t, err)
	v, err := tasks.NewStore(rdb).Get(ctx, "rq-2")
	require.NoError(t, err)
	require.Equal(t, "rq-2", v.ID)
	require.Equal(t, "llm", v.Agent)
	require.Equal(t, "chat", v.Action)
	require.Equal(t, tasks.DefaultQueue, v.Queue)
	require.Equal(t, "c-rq-2", v.CorrelationID)
	require.Equal(t, tasks.StatePending, v.State)
	require.Equal(t, 1, v.Run)
	require.Len(t, v.History, len(e.History)+1)
	require.Equal(t, []string{tasks.EventQueued, tasks.EventDeadLettered, tasks.EventRequeued},
		[]string{v.History[0].Event, v.History[1].Event, v.History[2].Event})
	require.Equal(t, "status", v.History[1].ClassifiedBy, "the dead letter's event keeps classified_by")
	require.Equal(t, "status", v.History[2].ClassifiedBy, "the requeued event carries the dead letter's class and classified_by")
	require.Empty(t, v.ClassifiedBy, "the requeued run has no failure yet")
	ttl, err := rdb.TTL(ctx, rkeys.Task("rq-2")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0), "the rebuilt record expires like any other")

	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(tasks.DefaultQueue, "rq-2#1")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)
}

// TestRequeueMatchingAndDeleteMatching: the filtered-set operations of the
// inspector's `dlq requeue --all` and the console act on exactly the entries
// the filter selects; an entry that cannot be requeued (no agent) is
// counted as failed and stays, and the others go on.
func TestRequeueMatchingAndDeleteMatching(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	for _, id := range []string{"a1", "a2", "a3"} {
		deadTask(t, rdb, s, id)
	}
	for _, e := range []*deadletter.Entry{
		{ID: "b1", Agent: "tool", ErrorClass: "timeout", Queue: tasks.DefaultQueue},
		{ID: "b2", Agent: "tool", ErrorClass: "timeout", Queue: tasks.DefaultQueue},
		{ID: "x", ErrorClass: "invalid_request", Reason: deadletter.ReasonInvalidPayload, Payload: []byte("garbage")},
	} {
		_, err := s.Put(ctx, e)
		require.NoError(t, err)
	}
	client := tasks.NewClient(rdb)

	var seen []string
	n, failed, err := s.RequeueMatching(ctx, client, deadletter.Filter{Class: "invalid_request"}, func(id string, err error) {
		seen = append(seen, id)
	})
	require.NoError(t, err)
	require.Equal(t, 3, n, "a1, a2, a3")
	require.Equal(t, 1, failed, "x has no agent")
	require.ElementsMatch(t, []string{"a1", "a2", "a3", "x"}, seen)
	_, err = s.Get(ctx, "x")
	require.NoError(t, err, "a failed requeue keeps its dead letter")
	v, err := tasks.NewStore(rdb).Get(ctx, "a2")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)

	deleted, err := s.DeleteMatching(ctx, deadletter.Filter{Agent: "tool"})
	require.NoError(t, err)
	require.Equal(t, 2, deleted)
	left, err := s.IDs(ctx, deadletter.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, left)
}

// TestRequeueKeepsStepsUnlessFresh (#37): a requeue keeps the steps the
// task's agents recorded (the new run gets them); a fresh one deletes them
// and zeroes the record's count.
func TestRequeueKeepsStepsUnlessFresh(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := deadletter.NewStore(rdb)
	st := record.NewStore(rdb)
	for _, id := range []string{"keep-1", "fresh-1"} {
		_, err := st.Create(ctx, record.New{ID: id, Seed: record.SeedOf(&tasks.Envelope{ID: id, Agent: "llm", Queue: tasks.DefaultQueue, EnqueuedAt: base}),
			State: tasks.StatePending})
		require.NoError(t, err)
		ok, err := st.Step(ctx, record.Delivery{ID: id, Attempt: 1}, record.Step{Name: "plan", Data: []byte(`"p"`)})
		require.NoError(t, err)
		require.True(t, ok)
		// deadTask creates the record itself: drop this one (the steps
		// hash stays) and give the new record the step's count and bytes.
		require.NoError(t, rdb.Del(ctx, rkeys.Task(id), rkeys.TaskHistory(id)).Err())
		deadTask(t, rdb, s, id)
		require.NoError(t, rdb.HSet(ctx, rkeys.Task(id), record.FieldSteps, 1, record.FieldStepsBytes, 3).Err())
	}

	_, err := s.RequeueTask(ctx, tasks.NewClient(rdb), "keep-1")
	require.NoError(t, err)
	steps, err := st.Steps(ctx, "keep-1")
	require.NoError(t, err)
	require.Len(t, steps, 1, "kept")
	v, err := tasks.NewStore(rdb).Get(ctx, "keep-1")
	require.NoError(t, err)
	require.Equal(t, 1, v.Steps)

	_, err = s.RequeueTask(ctx, tasks.NewClient(rdb), "fresh-1", deadletter.Fresh())
	require.NoError(t, err)
	steps, err = st.Steps(ctx, "fresh-1")
	require.NoError(t, err)
	require.Empty(t, steps, "deleted")
	v, err = tasks.NewStore(rdb).Get(ctx, "fresh-1")
	require.NoError(t, err)
	require.Zero(t, v.Steps)
	require.Equal(t, tasks.StatePending, v.State)
}
