package record

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// The asynq keys of a delivery on queue default.
const (
	activeKey    = "asynq:{default}:active"
	leaseKey     = "asynq:{default}:lease"
	processedKey = "asynq:{default}:processed"
)

// activeDelivery puts task id where asynq's server holds a delivery it
// runs (on its default queue's active list, beside another delivery; a
// lease; its task hash) and returns the call asynq makes to acknowledge it
// (broker.AsynqDoneScript's keys and arguments).
func activeDelivery(t *testing.T, rdb redis.UniversalClient, id string) AsynqDone {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rdb.LPush(ctx, activeKey, "other", id).Err())
	require.NoError(t, rdb.ZAdd(ctx, leaseKey, redis.Z{Score: 1, Member: id}).Err())
	require.NoError(t, rdb.HSet(ctx, broker.TaskKey("default", id), "msg", "m", "state", "active").Err())
	return AsynqDone{
		Keys: []string{activeKey, leaseKey, broker.TaskKey("default", id), processedKey + ":2026-11-24", processedKey},
		Args: []any{id, time.Now().Add(time.Hour).Unix(), int64(math.MaxInt64)},
	}
}

// requireAcked: asynq's done ran for id: its task hash, active entry and
// lease are gone, the other delivery stays.
func requireAcked(t *testing.T, rdb redis.UniversalClient, id string) {
	t.Helper()
	ctx := context.Background()
	n, err := rdb.Exists(ctx, broker.TaskKey("default", id)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "asynq's task hash is deleted")
	pos, err := rdb.LPos(ctx, activeKey, id, redis.LPosArgs{}).Result()
	require.ErrorIs(t, err, redis.Nil, "the delivery is off the active list (at %d)", pos)
	require.NoError(t, rdb.LPos(ctx, activeKey, "other", redis.LPosArgs{}).Err(), "other deliveries stay")
	_, err = rdb.ZScore(ctx, leaseKey, id).Result()
	require.ErrorIs(t, err, redis.Nil)
}

func processed(t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	n, err := rdb.Get(context.Background(), processedKey).Int()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return n
}

// recordDump is the task's record and history as Dump renders them.
func recordDump(t *testing.T, rdb redis.UniversalClient, id string) map[string]string {
	t.Helper()
	all := redistest.Dump(t, rdb)
	out := map[string]string{}
	for _, k := range []string{rkeys.Task(id), rkeys.TaskHistory(id)} {
		out[k] = all[k]
	}
	return out
}

// TestApplyAcked: the checked write and asynq's done land in one script,
// on miniredis and a real redis-server. A stale, ended or canceled
// delivery leaves the record alone and is still acknowledged; a delivery
// asynq no longer holds is ErrNotActive with the record written; a task
// with no record is seeded (the seed round runs asynq's done once).
func TestApplyAcked(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		ok := func() Change { return Succeeded(Attempt{Attempt: 1, Agent: "llm"}, json.RawMessage(`{"ok":true}`)) }
		acked := func(d Delivery, c Change) (Outcome, error) {
			return st.ApplyAcked(ctx, d, c, activeDelivery(t, rdb, d.ID))
		}

		t.Run("created task", func(t *testing.T) {
			create(t, st, "ack-1")
			before := processed(t, rdb)
			c := ok()
			d := Delivery{ID: "ack-1", Attempt: 1, Seed: seed()}
			out, err := acked(d, c)
			require.NoError(t, err)
			require.Equal(t, Applied, out)
			requireAcked(t, rdb, "ack-1")
			require.Equal(t, before+1, processed(t, rdb), "asynq counts the task processed")
			v := get(t, st, "ack-1")
			require.Equal(t, StateSucceeded, v.State)
			require.Equal(t, 1, v.Attempts)
			require.JSONEq(t, `{"ok":true}`, string(v.Result))
			require.Equal(t, []string{"1:queued", "2:succeeded"}, events(v))

			// The same write sent again (its reply lost) is recorded once;
			// asynq's done answers as it would (here: a delivery it holds
			// again, then one it no longer holds).
			_, err = st.ApplyAcked(ctx, d, c, activeDelivery(t, rdb, "ack-1")) // the same write, asynq's done again
			require.NoError(t, err)
			requireAcked(t, rdb, "ack-1")
			done := activeDelivery(t, rdb, "ack-1")
			require.NoError(t, rdb.LRem(ctx, activeKey, 0, "ack-1").Err())
			_, err = st.ApplyAcked(ctx, d, c, done)
			require.ErrorIs(t, err, ErrNotActive)
			require.Equal(t, []string{"1:queued", "2:succeeded"}, events(get(t, st, "ack-1")), "one succeeded event")
		})

		t.Run("counted run releases its tenant", func(t *testing.T) {
			// A run the fair dispatch counted (internal/broker): its
			// acknowledgement lowers its tenant's count and moves the
			// capped tenant back to the ready set, with a wake token,
			// for a task with webhooks (outbox keys) and one without.
			// The same with the next run asked for by a worker whose
			// dequeues have caps (with none, no run of its is counted).
			capped := nextOfDefault()
			capped.Args = append(capped.Args[:2], broker.FairConfig{Default: broker.TenantSettings{Concurrency: 2}}.DequeueArgs("default")...)
			for _, tc := range []struct {
				id     string
				notify []string
				next   *broker.Next
			}{{"ack-t1", nil, nil}, {"ack-t2", []string{"hook"}, nil}, {"ack-t3", nil, capped}, {"ack-t4", []string{"hook"}, capped}} {
				sd := seed()
				sd.Notify = tc.notify
				ok2, err := st.Create(ctx, New{ID: tc.id, Seed: sd, State: StatePending})
				require.NoError(t, err)
				require.True(t, ok2)
				done := activeDelivery(t, rdb, tc.id)
				done.Next = tc.next
				require.NoError(t, rdb.HSet(ctx, broker.TaskKey("default", tc.id), broker.FieldCounted, "acme").Err())
				require.NoError(t, rdb.HSet(ctx, rkeys.FairInflight("default"), "acme", 2).Err())
				require.NoError(t, rdb.ZAdd(ctx, rkeys.FairCapped("default"), redis.Z{Score: 7, Member: "acme"}).Err())
				require.NoError(t, rdb.Del(ctx, rkeys.Wake("default")).Err())
				out, err := st.ApplyAcked(ctx, Delivery{ID: tc.id, Attempt: 1, Seed: sd}, ok(), done)
				require.NoError(t, err)
				require.Equal(t, Applied, out)
				requireAcked(t, rdb, tc.id)
				require.Equal(t, "1", rdb.HGet(ctx, rkeys.FairInflight("default"), "acme").Val(), tc.id)
				if tc.next == nil { // (the next run's dequeue finds acme's lanes empty: it leaves the ready set)
					require.Equal(t, 7.0, rdb.ZScore(ctx, rkeys.FairReady("default"), "acme").Val(), tc.id)
				}
				require.Zero(t, rdb.ZCard(ctx, rkeys.FairCapped("default")).Val(), tc.id)
				require.EqualValues(t, 1, rdb.LLen(ctx, rkeys.Wake("default")).Val(), tc.id)
				require.NoError(t, rdb.Del(ctx, rkeys.FairReady("default")).Err())
			}
		})

		t.Run("record not written yet is seeded", func(t *testing.T) {
			before := processed(t, rdb)
			out, err := acked(Delivery{ID: "ack-2", Attempt: 1, Seed: seed()}, ok())
			require.NoError(t, err, "the seed round runs asynq's done once")
			require.Equal(t, Applied, out)
			requireAcked(t, rdb, "ack-2")
			require.Equal(t, before+1, processed(t, rdb))
			v := get(t, st, "ack-2")
			require.Equal(t, StateSucceeded, v.State)
			require.Equal(t, "c-1", v.CorrelationID)
			require.Equal(t, "chat", v.Action)
			require.Equal(t, "default", v.Queue)
			require.Equal(t, []string{"1:succeeded"}, events(v))
		})

		t.Run("stale run is acked, not recorded", func(t *testing.T) {
			create(t, st, "ack-3")
			require.Equal(t, Applied, apply(t, st, Delivery{ID: "ack-3", Run: 2, Restarts: 1, Attempt: 1}, Started()))
			before := recordDump(t, rdb, "ack-3")
			out, err := acked(Delivery{ID: "ack-3", Run: 1, Attempt: 1, Seed: seed()}, ok())
			require.NoError(t, err)
			require.Equal(t, Stale, out)
			requireAcked(t, rdb, "ack-3")
			require.Equal(t, before, recordDump(t, rdb, "ack-3"), "nothing written")
			require.Equal(t, StateActive, get(t, st, "ack-3").State)
		})

		t.Run("ended run is acked, not recorded", func(t *testing.T) {
			create(t, st, "ack-4")
			d := Delivery{ID: "ack-4", Attempt: 1, Seed: seed()}
			require.Equal(t, Applied, apply(t, st, d, DeadLettered(Attempt{Attempt: 1, ErrorClass: "bad_request"}, "not_retryable")))
			before := recordDump(t, rdb, "ack-4")
			out, err := acked(d, ok())
			require.NoError(t, err)
			require.Equal(t, Ended, out)
			requireAcked(t, rdb, "ack-4")
			require.Equal(t, before, recordDump(t, rdb, "ack-4"), "nothing written")
		})

		t.Run("canceled task is acked, not recorded", func(t *testing.T) {
			create(t, st, "ack-5")
			_, err := st.Cancel(ctx, "ack-5", "test")
			require.NoError(t, err)
			before := recordDump(t, rdb, "ack-5")
			out, err := acked(Delivery{ID: "ack-5", Attempt: 1, Seed: seed()}, ok())
			require.NoError(t, err)
			require.Equal(t, Canceled, out)
			requireAcked(t, rdb, "ack-5")
			require.Equal(t, before, recordDump(t, rdb, "ack-5"), "nothing written")
			require.Equal(t, StateCanceled, get(t, st, "ack-5").State)
		})

		t.Run("delivery asynq no longer holds", func(t *testing.T) {
			create(t, st, "ack-6")
			done := activeDelivery(t, rdb, "ack-6")
			require.NoError(t, rdb.LRem(ctx, activeKey, 0, "ack-6").Err())
			_, err := st.ApplyAcked(ctx, Delivery{ID: "ack-6", Attempt: 1, Seed: seed()}, ok(), done)
			require.ErrorIs(t, err, ErrNotActive)
			require.Equal(t, StateSucceeded, get(t, st, "ack-6").State, "the record is written before asynq's part runs")
		})

		t.Run("call of another shape is refused", func(t *testing.T) {
			_, err := st.ApplyAcked(ctx, Delivery{ID: "ack-7", Attempt: 1, Seed: seed()}, ok(),
				AsynqDone{Keys: []string{"a"}, Args: []any{"b"}})
			require.ErrorContains(t, err, "not 5 and 3")
			_, err = st.Get(ctx, "ack-7")
			require.ErrorIs(t, err, ErrNotFound)
		})
	})
}

// TestApplyWritesOnlyWhatChanged: a first success writes no error fields
// (there is no error to clear) and leaves run and restarts as Create wrote
// them; a success after a failed attempt clears the error; a new run gets
// its run and restarts written: by Apply and ApplyAcked alike.
func TestApplyWritesOnlyWhatChanged(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		fields := func(id string) map[string]string {
			m, err := rdb.HGetAll(ctx, rkeys.Task(id)).Result()
			require.NoError(t, err)
			return m
		}
		for _, viaAck := range []bool{false, true} {
			succeed := func(d Delivery) {
				t.Helper()
				c := Succeeded(Attempt{Attempt: d.Attempt}, nil)
				var out Outcome
				var err error
				if viaAck {
					out, err = st.ApplyAcked(ctx, d, c, activeDelivery(t, rdb, d.ID))
				} else {
					out, err = st.Apply(ctx, d, c)
				}
				require.NoError(t, err)
				require.Equal(t, Applied, out)
			}
			name := func(s string) string {
				if viaAck {
					return s + "-acked"
				}
				return s
			}
			first, again, next := name("first"), name("again"), name("next")
			for _, id := range []string{first, again, next} {
				create(t, st, id)
			}

			succeed(Delivery{ID: first, Attempt: 1})
			m := fields(first)
			require.Equal(t, "succeeded", m[FieldState])
			require.Equal(t, "1", m[FieldAttempts])
			require.Equal(t, "0", m[FieldRun])
			require.NotContains(t, m, FieldErrorClass, "no error to clear")
			require.NotContains(t, m, FieldError)
			require.NotContains(t, m, FieldRestarts, "run 0 has no restarts")
			require.NotContains(t, m, FieldAttemptsBase, "the run did not change")

			d := Delivery{ID: again, Attempt: 1}
			require.Equal(t, Applied, apply(t, st, d, Started()))
			require.NotContains(t, fields(again), FieldRestarts, "a start of the current run writes no run fields")
			require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: 1, ErrorClass: "transient", Error: "reset"}, time.Second, t0)))
			require.Equal(t, "transient", fields(again)[FieldErrorClass])
			d.Attempt = 2
			succeed(d)
			m = fields(again)
			require.Equal(t, "succeeded", m[FieldState])
			require.Equal(t, "2", m[FieldAttempts])
			require.Equal(t, "", m[FieldErrorClass], "the failed attempt's error is cleared")
			require.Equal(t, "", m[FieldError])
			v := get(t, st, again)
			require.Empty(t, v.ErrorClass)
			require.Empty(t, v.Error)

			succeed(Delivery{ID: next, Run: 2, Restarts: 1, Attempt: 1})
			m = fields(next)
			require.Equal(t, "2", m[FieldRun], "a new run is written")
			require.Equal(t, "1", m[FieldRestarts])
			require.Equal(t, "1", m[FieldAttempts])
		}
	})
}
