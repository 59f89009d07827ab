package record

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
)

// lastEvents is the history's events after the first (queued).
func lastEvents(t *testing.T, st *Store, id string) []Event {
	t.Helper()
	return get(t, st, id).History[1:]
}

// TestStartRecordsLostAttempt: a start that finds the run's attempt active
// on another delivery (another attempt number, or another worker) records
// that attempt lost — interrupted, lost, its worker and number — before
// its own start, in the same write; the same delivery's writes record
// nothing lost.
func TestStartRecordsLostAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "t1")
		first := Delivery{ID: "t1", Attempt: 1, Worker: "host-a:11", Seed: seed()}
		require.Equal(t, Applied, apply(t, st, first, Started()))
		require.Equal(t, Applied, apply(t, st, first, Started()), "the same delivery's start again (its lazy start, then its outcome)")
		require.Empty(t, lastEvents(t, st, "t1"))
		w, err := rdb.HGet(ctx, rkeys.Task("t1"), FieldWorker).Result()
		require.NoError(t, err)
		require.Equal(t, "host-a:11", w, "the record names the worker running the attempt")

		// host-a was killed; asynq's lease recovery redelivers the run.
		second := Delivery{ID: "t1", Attempt: 2, Worker: "host-b:22", Seed: seed()}
		require.Equal(t, Applied, apply(t, st, second, Started()))
		evs := lastEvents(t, st, "t1")
		require.Len(t, evs, 1)
		lost := evs[0]
		require.Equal(t, EventInterrupted, lost.Event)
		require.True(t, lost.Lost)
		require.Equal(t, ReasonWorkerLost, lost.Reason)
		require.Equal(t, "host-a:11", lost.Worker)
		require.Equal(t, 1, lost.Attempt, "the lost attempt")
		require.Equal(t, int64(2), lost.Seq)
		v := get(t, st, "t1")
		require.Equal(t, StateActive, v.State)
		require.Equal(t, 2, v.Attempts)

		// The new delivery's outcome: no second lost event.
		ok := Succeeded(Attempt{Attempt: 2, Agent: "llm", Worker: "host-b:22"}, json.RawMessage(`{}`))
		require.Equal(t, Applied, apply(t, st, second, ok))
		require.Equal(t, []string{"1:queued", "2:interrupted", "3:succeeded"}, events(get(t, st, "t1")))
	})
}

// TestStartLostCases: what counts as a lost attempt and what does not.
func TestStartLostCases(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		// Another worker, the same attempt number (asynq put the delivery
		// back without counting it, and its worker never said so): lost.
		create(t, st, "same-n")
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "same-n", Attempt: 1, Worker: "a:1", Seed: seed()}, Started()))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "same-n", Attempt: 1, Worker: "b:2", Seed: seed()}, Started()))
		evs := lastEvents(t, st, "same-n")
		require.Len(t, evs, 1)
		require.True(t, evs[0].Lost)
		require.Equal(t, "a:1", evs[0].Worker)

		// A record started by a write naming no worker, redelivered: lost,
		// without a worker.
		create(t, st, "no-worker")
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "no-worker", Attempt: 1, Seed: seed()}, Started()))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "no-worker", Attempt: 2, Worker: "b:2", Seed: seed()}, Started()))
		evs = lastEvents(t, st, "no-worker")
		require.Len(t, evs, 1)
		require.True(t, evs[0].Lost)
		require.Empty(t, evs[0].Worker)

		// A retry after a recorded failure, and a put-back at shutdown
		// (interrupted, pending): nothing was lost.
		create(t, st, "retry")
		d1 := Delivery{ID: "retry", Attempt: 1, Worker: "a:1", Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d1, Started()))
		require.Equal(t, Applied, apply(t, st, d1, Retrying(Attempt{Attempt: 1, ErrorClass: "timeout"}, 0, t0)))
		d2 := Delivery{ID: "retry", Attempt: 2, Worker: "b:2", Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d2, Started()))
		require.Equal(t, Applied, apply(t, st, d2, Interrupted(Attempt{Attempt: 2, Worker: "b:2"})))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "retry", Attempt: 2, Worker: "c:3", Seed: seed()}, Started()))
		for _, ev := range lastEvents(t, st, "retry") {
			require.False(t, ev.Lost, "%+v", ev)
		}

		// A later run's first start after a restart: nothing lost.
		create(t, st, "restart")
		r0 := Delivery{ID: "restart", Attempt: 1, Worker: "a:1", Seed: seed()}
		require.Equal(t, Applied, apply(t, st, r0, Started()))
		require.Equal(t, Applied, apply(t, st, r0, Restarting(Attempt{Attempt: 1, ErrorClass: "x"}, NextRun{Run: 1, Restarts: 1}, 0)))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "restart", Run: 1, Restarts: 1, Attempt: 1, Worker: "b:2", Seed: seed()}, Started()))
		for _, ev := range lastEvents(t, st, "restart") {
			require.False(t, ev.Lost, "%+v", ev)
		}
		require.Equal(t, StateActive, get(t, st, "restart").State)
	})
}

// TestRecoveredPutsTheRecordBack: once asynq's lease recovery took a lost
// worker's run back, Recovered puts the record (active on that worker)
// back to pending with the lost attempt's event; a record another
// delivery started, or one that ended, is left alone; the next delivery's
// start then records nothing lost twice.
func TestRecoveredPutsTheRecordBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "t1")
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "t1", Attempt: 1, Worker: "a:1", Seed: seed()}, Started()))
		ok, err := st.Recovered(ctx, "t1", "b:2")
		require.NoError(t, err)
		require.False(t, ok, "another worker's")
		ok, err = st.Recovered(ctx, "t1", "a:1")
		require.NoError(t, err)
		require.True(t, ok)
		v := get(t, st, "t1")
		require.Equal(t, StatePending, v.State)
		evs := v.History[1:]
		require.Len(t, evs, 1)
		require.Equal(t, EventInterrupted, evs[0].Event)
		require.True(t, evs[0].Lost)
		require.Equal(t, "a:1", evs[0].Worker)
		require.Equal(t, 1, evs[0].Attempt)
		require.Equal(t, ReasonWorkerLost, evs[0].Reason)
		ok, err = st.Recovered(ctx, "t1", "a:1")
		require.NoError(t, err)
		require.False(t, ok, "once")

		require.Equal(t, Applied, apply(t, st, Delivery{ID: "t1", Attempt: 2, Worker: "b:2", Seed: seed()}, Started()))
		require.Equal(t, []string{"1:queued", "2:interrupted"}, events(get(t, st, "t1")), "the redelivery records nothing lost again")
		require.Equal(t, StateActive, get(t, st, "t1").State)
	})
}
