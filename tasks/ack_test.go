package tasks

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// activeDelivery puts task id where asynq's server holds a delivery it
// runs (on its default queue's active list, beside another delivery; a
// lease; its task hash) and returns the call asynq makes to acknowledge it.
func activeDelivery(t *testing.T, rdb redis.UniversalClient, id string) AsynqDone {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.LPush(ctx, "asynq:{default}:active", "other", id).Err())
	require.NoError(t, rdb.ZAdd(ctx, "asynq:{default}:lease", redis.Z{Score: 1, Member: id}).Err())
	require.NoError(t, rdb.HSet(ctx, "asynq:{default}:t:"+id, "msg", "m", "state", "active").Err())
	return AsynqDone{
		Keys: []string{"asynq:{default}:active", "asynq:{default}:lease", "asynq:{default}:t:" + id,
			"asynq:{default}:processed:2026-11-24", "asynq:{default}:processed"},
		Args: []any{id, time.Now().Add(time.Hour).Unix(), int64(math.MaxInt64)},
	}
}

// TestBeginTransitionAcked: the record write and asynq's done land in one
// script, on miniredis and a real redis-server; a fenced record is left
// alone while the delivery is still acknowledged, and a delivery asynq no
// longer holds answers asynq's own NOT FOUND.
func TestBeginTransitionAcked(t *testing.T) {
	t.Parallel()
	succeeded := Patch{State: StateSucceeded, ClearError: true}
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			c := NewClient(rdb)
			st := c.Store()

			acked := func(t *testing.T, id string) {
				t.Helper()
				n, err := rdb.Exists(ctx, "asynq:{default}:t:"+id).Result()
				require.NoError(t, err)
				require.Zero(t, n, "asynq's task hash is deleted")
				pos, err := rdb.LPos(ctx, "asynq:{default}:active", id, redis.LPosArgs{}).Result()
				require.ErrorIs(t, err, redis.Nil, "the delivery is off the active list (at %d)", pos)
				require.NoError(t, rdb.LPos(ctx, "asynq:{default}:active", "other", redis.LPosArgs{}).Err(), "other deliveries stay")
				_, err = rdb.ZScore(ctx, "asynq:{default}:lease", id).Result()
				require.ErrorIs(t, err, redis.Nil)
			}

			t.Run("enqueued task", func(t *testing.T) {
				_, err := c.Enqueue(ctx, Task{ID: "ack-1", Agent: "tool"})
				require.NoError(t, err)
				before, err := rdb.Get(ctx, "asynq:{default}:processed").Int()
				if err != nil {
					before = 0
				}
				n, err := st.BeginTransitionAcked(ctx, &Envelope{ID: "ack-1", Agent: "tool"}, succeeded,
					Event{Event: EventSucceeded, Attempt: 1, Agent: "tool"}, activeDelivery(t, rdb, "ack-1"))
				require.NoError(t, err)
				require.Equal(t, 1, n)
				acked(t, "ack-1")
				after, err := rdb.Get(ctx, "asynq:{default}:processed").Int()
				require.NoError(t, err)
				require.Equal(t, before+1, after, "asynq counts the task processed")
				v, err := st.Get(ctx, "ack-1")
				require.NoError(t, err)
				require.Equal(t, StateSucceeded, v.State)
				require.Equal(t, 1, v.Attempts)
				require.Len(t, v.History, 2)
				require.Equal(t, EventSucceeded, v.History[1].Event)
			})

			t.Run("record not written yet is seeded", func(t *testing.T) {
				env := &Envelope{ID: "ack-2", Agent: "tool", Action: "go", Queue: "default", CorrelationID: "corr"}
				_, err := st.BeginTransitionAcked(ctx, env, succeeded, Event{Event: EventSucceeded, Attempt: 1}, activeDelivery(t, rdb, "ack-2"))
				require.NoError(t, err)
				acked(t, "ack-2")
				v, err := st.Get(ctx, "ack-2")
				require.NoError(t, err)
				require.Equal(t, StateSucceeded, v.State)
				require.Equal(t, "corr", v.CorrelationID)
				require.Equal(t, "go", v.Action)
			})

			t.Run("stale run is acked, not recorded", func(t *testing.T) {
				_, err := st.Begin(ctx, &Envelope{ID: "ack-3", Agent: "tool", Run: 2})
				require.NoError(t, err)
				_, err = st.BeginTransitionAcked(ctx, &Envelope{ID: "ack-3", Agent: "tool", Run: 1}, succeeded,
					Event{Event: EventSucceeded, Attempt: 1}, activeDelivery(t, rdb, "ack-3"))
				require.ErrorIs(t, err, ErrStale)
				acked(t, "ack-3")
				v, err := st.Get(ctx, "ack-3")
				require.NoError(t, err)
				require.Equal(t, StateActive, v.State)
			})

			t.Run("canceled task is acked, not recorded", func(t *testing.T) {
				_, err := c.Enqueue(ctx, Task{ID: "ack-4", Agent: "tool"})
				require.NoError(t, err)
				_, err = c.Cancel(ctx, "ack-4", "test")
				require.NoError(t, err)
				_, err = st.BeginTransitionAcked(ctx, &Envelope{ID: "ack-4", Agent: "tool"}, succeeded,
					Event{Event: EventSucceeded, Attempt: 1}, activeDelivery(t, rdb, "ack-4"))
				require.ErrorIs(t, err, ErrCanceled)
				acked(t, "ack-4")
				v, err := st.Get(ctx, "ack-4")
				require.NoError(t, err)
				require.Equal(t, StateCanceled, v.State)
			})

			t.Run("delivery asynq no longer holds", func(t *testing.T) {
				_, err := c.Enqueue(ctx, Task{ID: "ack-5", Agent: "tool"})
				require.NoError(t, err)
				done := activeDelivery(t, rdb, "ack-5")
				require.NoError(t, rdb.LRem(ctx, "asynq:{default}:active", 0, "ack-5").Err())
				_, err = st.BeginTransitionAcked(ctx, &Envelope{ID: "ack-5", Agent: "tool"}, succeeded,
					Event{Event: EventSucceeded, Attempt: 1}, done)
				require.ErrorContains(t, err, "NOT FOUND")
				v, err := st.Get(ctx, "ack-5")
				require.NoError(t, err)
				require.Equal(t, StateSucceeded, v.State, "the record is written before asynq's part runs")
			})

			t.Run("call of another shape is refused", func(t *testing.T) {
				_, err := st.BeginTransitionAcked(ctx, &Envelope{ID: "ack-6", Agent: "tool"}, succeeded,
					Event{Event: EventSucceeded}, AsynqDone{Keys: []string{"a"}, Args: []any{"b"}})
				require.ErrorContains(t, err, "not 5 and 3")
				_, err = st.Get(ctx, "ack-6")
				require.ErrorIs(t, err, ErrNotFound)
			})
		})
	}
}

// TestBeginWritesOnlyWhatChanged: a first success writes no error fields
// (there is no error to clear) and leaves run and restarts as Create wrote
// them; a success after a failed attempt clears the error, and a new run
// gets its run and restarts written, by BeginTransition and by
// BeginTransitionAcked alike.
func TestBeginWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			c := NewClient(rdb)
			st := c.Store()
			ok := Patch{State: StateSucceeded, ClearError: true}
			fields := func(id string) map[string]string {
				m, err := rdb.HGetAll(ctx, rkeys.Task(id)).Result()
				require.NoError(t, err)
				return m
			}
			for _, acked := range []bool{false, true} {
				succeed := func(env *Envelope, attempt int) {
					t.Helper()
					ev := Event{Event: EventSucceeded, Attempt: attempt}
					var err error
					if acked {
						_, err = st.BeginTransitionAcked(ctx, env, ok, ev, activeDelivery(t, rdb, env.ID))
					} else {
						_, err = st.BeginTransition(ctx, env, ok, ev)
					}
					require.NoError(t, err)
				}
				first, again, next := fmt.Sprintf("first-%t", acked), fmt.Sprintf("again-%t", acked), fmt.Sprintf("next-%t", acked)
				for _, id := range []string{first, again, next} {
					_, err := c.Enqueue(ctx, Task{ID: id, Agent: "tool"})
					require.NoError(t, err)
				}

				succeed(&Envelope{ID: first, Agent: "tool"}, 1)
				m := fields(first)
				require.Equal(t, "succeeded", m["state"])
				require.Equal(t, "1", m["attempts"])
				require.Equal(t, "0", m["run"])
				require.NotContains(t, m, "error_class", "no error to clear")
				require.NotContains(t, m, "error")
				require.NotContains(t, m, "restarts", "run 0 has no restarts")

				_, err := st.Begin(ctx, &Envelope{ID: again, Agent: "tool"})
				require.NoError(t, err)
				require.NoError(t, st.Apply(ctx, again, SetRetrying(Outcome{Attempt: 1, ErrorClass: "transient", Error: "reset"}, time.Second, time.Now())))
				require.Equal(t, "transient", fields(again)["error_class"])
				succeed(&Envelope{ID: again, Agent: "tool"}, 2)
				m = fields(again)
				require.Equal(t, "succeeded", m["state"])
				require.Equal(t, "2", m["attempts"])
				require.Equal(t, "", m["error_class"], "the failed attempt's error is cleared")
				require.Equal(t, "", m["error"])
				v, err := st.Get(ctx, again)
				require.NoError(t, err)
				require.Empty(t, v.ErrorClass)
				require.Empty(t, v.Error)

				succeed(&Envelope{ID: next, Agent: "tool", Run: 2, Restarts: 1}, 1)
				m = fields(next)
				require.Equal(t, "2", m["run"], "a new run is written")
				require.Equal(t, "1", m["restarts"])
			}
		})
	}
}
