package record

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// eachBackend runs f on miniredis and on a real redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, st *Store)) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			f(t, rdb, NewStore(rdb, WithRetention(time.Hour), WithClock(func() time.Time { return t0 })))
		})
	}
}

func seed() Seed {
	return Seed{Agent: "llm", Action: "chat", Queue: "default", CorrelationID: "c-1", EnqueuedAt: t0}
}

func create(t *testing.T, st *Store, id string) {
	t.Helper()
	ok, err := st.Create(context.Background(), New{ID: id, Seed: seed(), State: StatePending})
	require.NoError(t, err)
	require.True(t, ok)
}

func apply(t *testing.T, st *Store, d Delivery, c Change) Outcome {
	t.Helper()
	out, err := st.Apply(context.Background(), d, c)
	require.NoError(t, err)
	return out
}

func get(t *testing.T, st *Store, id string) *View {
	t.Helper()
	v, err := st.Get(context.Background(), id)
	require.NoError(t, err)
	return v
}

func events(v *View) []string {
	var out []string
	for _, e := range v.History {
		out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Event))
	}
	return out
}

// TestApplyOutcomes: each Outcome of the checked write, and that nothing
// is written unless it is Applied.
func TestApplyOutcomes(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "t1")
		d := Delivery{ID: "t1", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Started()))
		v := get(t, st, "t1")
		require.Equal(t, StateActive, v.State)
		require.Equal(t, 1, v.Attempts)
		require.Equal(t, []string{"1:queued"}, events(v), "a start appends no event")

		ok := Succeeded(Attempt{Attempt: 1, Agent: "llm"}, json.RawMessage(`{"a":1}`))
		require.Equal(t, Applied, apply(t, st, d, ok))
		require.Equal(t, Applied, apply(t, st, d, ok), "the same write again: a no-op, answered Applied")
		v = get(t, st, "t1")
		require.Equal(t, []string{"1:queued", "2:succeeded"}, events(v))
		require.JSONEq(t, `{"a":1}`, string(v.Result))

		before := redistest.Dump(t, rdb)
		require.Equal(t, Ended, apply(t, st, d, Succeeded(Attempt{Attempt: 1}, nil)), "another write for an ended run")
		require.Equal(t, Ended, apply(t, st, d, DeadLettered(Attempt{Attempt: 1}, "not_retryable")))
		require.Equal(t, Stale, apply(t, st, Delivery{ID: "t1", Run: -1, Attempt: 1}, Started()))
		require.Equal(t, before, redistest.Dump(t, rdb), "nothing written")

		create(t, st, "t2")
		_, err := st.Cancel(ctx, "t2", "no longer needed")
		require.NoError(t, err)
		before = redistest.Dump(t, rdb)
		require.Equal(t, Canceled, apply(t, st, Delivery{ID: "t2", Attempt: 1}, Started()))
		require.Equal(t, Canceled, apply(t, st, Delivery{ID: "t2", Run: 3, Attempt: 1}, Retrying(Attempt{Attempt: 1}, time.Second, t0)))
		require.Equal(t, before, redistest.Dump(t, rdb), "nothing written")
	})
}

// TestApplyIdempotent: every kind of change sent twice (a reply lost) is
// recorded once: one event, one attempt, one restart.
func TestApplyIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "t")
		a := Attempt{Attempt: 1, Agent: "llm", ErrorClass: "timeout", Error: "slow"}
		d := Delivery{ID: "t", Attempt: 1, Seed: seed()}
		for _, c := range []Change{
			Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second),
			Started(),
			CallFailed(a),
			Retrying(a, time.Second, t0.Add(time.Second)),
		} {
			require.Equal(t, Applied, apply(t, st, d, c))
			require.Equal(t, Applied, apply(t, st, d, c))
		}
		d.Attempt = 2
		r := Restarting(Attempt{Attempt: 2, ErrorClass: "timeout"}, NextRun{Run: 1, Restarts: 1}, time.Minute)
		require.Equal(t, Applied, apply(t, st, d, r))
		require.Equal(t, Applied, apply(t, st, d, r))
		v := get(t, st, "t")
		require.Equal(t, []string{"1:queued", "2:deferred", "3:failed", "4:retrying", "5:restarting"}, events(v))
		require.Equal(t, 2, v.Attempts)
		require.Equal(t, 1, v.Run)
		require.Equal(t, 1, v.Restarts)

		d1 := Delivery{ID: "t", Run: 1, Restarts: 1, Attempt: 1}
		dl := DeadLettered(Attempt{Attempt: 1, Restart: 1, ErrorClass: "timeout"}, "restarts_exhausted")
		require.Equal(t, Applied, apply(t, st, d1, dl))
		require.Equal(t, Applied, apply(t, st, d1, dl))
		v = get(t, st, "t")
		require.Equal(t, StateDeadLettered, v.State)
		require.Equal(t, 3, v.Attempts, "two attempts of run 0, one of run 1")
		require.Equal(t, "6:dead_lettered", events(v)[5])
		require.Len(t, v.History, 6)
		require.Equal(t, "restarts_exhausted", v.History[5].Reason)
	})
}

// TestAttemptsCountDeliveries: a delivery whose worker died before its
// start was written still counts: the next delivery's attempt number
// (asynq's count) sets the record's attempts, whatever was written before.
func TestAttemptsCountDeliveries(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "t")
		// Delivery 1 died before writing anything; delivery 2 succeeds
		// quickly (its start rides its outcome).
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "t", Attempt: 2}, Succeeded(Attempt{Attempt: 2}, nil)))
		require.Equal(t, 2, get(t, st, "t").Attempts)

		// A start written twice by two sends counts once; a later, lower
		// attempt number never lowers the count.
		create(t, st, "u")
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "u", Attempt: 3}, Started()))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "u", Attempt: 3}, Started()))
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "u", Attempt: 1}, Started()))
		require.Equal(t, 3, get(t, st, "u").Attempts)
		// A redelivery of a new run (restart not recorded) counts on top.
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "u", Run: 1, Restarts: 1, Attempt: 2}, Started()))
		v := get(t, st, "u")
		require.Equal(t, 5, v.Attempts)
		require.Equal(t, 1, v.Run)
	})
}

// TestApplySeeds: a write for a task with no record (a Cluster's enqueue
// records after it queues, or the record expired) seeds it from the
// delivery; Create then fills in only what is missing and appends its
// event with the next seq.
func TestApplySeeds(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		d := Delivery{ID: "s", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Second, t0)))
		v := get(t, st, "s")
		require.Equal(t, "llm", v.Agent)
		require.Equal(t, "c-1", v.CorrelationID)
		require.Equal(t, StateRetrying, v.State)
		ok, err := st.Create(context.Background(), New{ID: "s", Seed: seed(), State: StatePending})
		require.NoError(t, err)
		require.False(t, ok)
		v = get(t, st, "s")
		require.Equal(t, StateRetrying, v.State, "Create leaves the worker's state")
		require.Equal(t, []string{"1:retrying", "2:queued"}, events(v))
		ttl, err := rdb.TTL(context.Background(), rkeys.TaskHistory("s")).Result()
		require.NoError(t, err)
		require.Positive(t, ttl)
	})
}

// TestSeqStable: sequence numbers go up by one per event and never change:
// a merged deferral takes a new number, and an elided middle keeps the
// number of the first event it replaces while the events after keep theirs.
func TestSeqStable(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "h")
		d := Delivery{ID: "h", Attempt: 1}
		for range 3 {
			apply(t, st, d, Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second))
		}
		v := get(t, st, "h")
		require.Equal(t, []string{"1:queued", "4:deferred"}, events(v))
		require.Equal(t, 3, v.History[1].Count)
		for i := range 300 {
			d.Attempt = i + 1
			apply(t, st, d, Retrying(Attempt{Attempt: i + 1}, time.Millisecond, t0))
		}
		v = get(t, st, "h")
		require.Len(t, v.History, HistoryHead+1+HistoryTail)
		el := v.History[HistoryHead]
		require.Equal(t, EventElided, el.Event)
		require.EqualValues(t, HistoryHead+3, el.Seq, "the marker keeps the first replaced event's seq")
		last := v.History[len(v.History)-1]
		require.EqualValues(t, 304, last.Seq)
		for i := 1; i < len(v.History); i++ {
			require.Greater(t, v.History[i].Seq, v.History[i-1].Seq)
		}
		for i := HistoryHead + 1; i < len(v.History); i++ {
			require.EqualValues(t, 304-(len(v.History)-1-i), v.History[i].Seq, "the tail keeps its numbers")
		}
	})
}

// TestCancelIdempotent: a cancel answers once canceled, and the same
// cancel's resend (a lost reply) answers as the first.
func TestCancelOutcomes(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		_, err := st.Cancel(ctx, "none", "")
		require.ErrorIs(t, err, ErrNotFound)
		create(t, st, "c")
		c, err := st.Cancel(ctx, "c", "why")
		require.NoError(t, err)
		require.Equal(t, StatePending, c.Previous)
		c, err = st.Cancel(ctx, "c", "again")
		require.ErrorIs(t, err, ErrTaskEnded)
		require.Equal(t, StateCanceled, c.Previous)
		v := get(t, st, "c")
		require.Equal(t, []string{"1:queued", "2:task_canceled"}, events(v))
		require.Equal(t, "why", v.CancelReason)
	})
}

// TestCreateOptionalFields: a deadline and webhooks to notify are written
// with the record (and only when set), by Create and when a write seeds a
// missing record.
func TestCreateOptionalFields(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		s := seed()
		s.Deadline, s.Notify = t0.Add(time.Minute), []string{"ops", "billing"}
		_, err := st.Create(ctx, New{ID: "x", Seed: s, State: StatePending})
		require.NoError(t, err)
		v := get(t, st, "x")
		require.Equal(t, t0.Add(time.Minute).Format(time.RFC3339Nano), v.Deadline)
		require.Equal(t, []string{"ops", "billing"}, v.Notify)
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "y", Attempt: 1, Seed: s}, Started()))
		require.Equal(t, []string{"ops", "billing"}, get(t, st, "y").Notify)
		create(t, st, "plain")
		fields, err := rdb.HKeys(ctx, rkeys.Task("plain")).Result()
		require.NoError(t, err)
		require.NotContains(t, fields, FieldDeadline)
		require.NotContains(t, fields, FieldNotify)
	})
}

// TestRequeueClearsDeadlineAndReason: a requeued dead letter's new run has
// no deadline (the requeue is the operator's) and no dead-letter reason.
func TestRequeueClearsDeadlineAndReason(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		s := seed()
		s.Deadline = t0.Add(time.Minute)
		_, err := st.Create(ctx, New{ID: "r", Seed: s, State: StatePending})
		require.NoError(t, err)
		apply(t, st, Delivery{ID: "r", Attempt: 1}, DeadLettered(Attempt{ErrorClass: "timeout"}, "deadline_exceeded"))
		require.Equal(t, "deadline_exceeded", get(t, st, "r").Reason)
		require.NoError(t, st.Requeued(ctx, Delivery{ID: "r", Run: 1, Seed: seed()}, 1, nil, Event{Event: EventRequeued}))
		v := get(t, st, "r")
		require.Equal(t, StatePending, v.State)
		require.Empty(t, v.Deadline)
		require.Empty(t, v.Reason)
	})
}

// TestClassifiedBy: a failure's classified_by is written with its
// error_class (record and event), an event without one omits it, and
// whatever clears the error (a success, a requeue, a cancel) clears it too.
func TestClassifiedBy(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "cb")
		d := Delivery{ID: "cb", Attempt: 1, Seed: seed()}
		failed := Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error", ClassifiedBy: "default", Error: "boom"}
		apply(t, st, d, CallFailed(failed))
		apply(t, st, d, Retrying(failed, time.Second, t0.Add(time.Second)))
		v := get(t, st, "cb")
		require.Equal(t, "provider_error", v.ErrorClass)
		require.Equal(t, "default", v.ClassifiedBy)
		for _, ev := range v.History[1:] {
			require.Equal(t, "default", ev.ClassifiedBy, ev.Event)
		}
		raw, err := rdb.LIndex(ctx, rkeys.TaskHistory("cb"), -1).Result()
		require.NoError(t, err)
		require.Contains(t, raw, `"error_class":"provider_error","classified_by":"default","error":"boom"`)
		first, err := rdb.LIndex(ctx, rkeys.TaskHistory("cb"), 0).Result()
		require.NoError(t, err)
		require.NotContains(t, first, "classified_by", "an event without a class omits it")
		js, err := json.Marshal(v)
		require.NoError(t, err)
		require.Contains(t, string(js), `"error_class":"provider_error","classified_by":"default"`)

		// A later failure decided otherwise overwrites it; a success clears it.
		d.Attempt = 2
		apply(t, st, d, Retrying(Attempt{Attempt: 2, ErrorClass: "rate_limited", ClassifiedBy: "status"}, time.Second, t0))
		require.Equal(t, "status", get(t, st, "cb").ClassifiedBy)
		d.Attempt = 3
		apply(t, st, d, Succeeded(Attempt{Attempt: 3}, nil))
		v = get(t, st, "cb")
		require.Empty(t, v.ErrorClass)
		require.Empty(t, v.ClassifiedBy)
		v.History = nil
		js, err = json.Marshal(v)
		require.NoError(t, err)
		require.NotContains(t, string(js), "classified_by", "omitted when empty")

		// The dead letter's event; a requeue clears it.
		create(t, st, "dl")
		apply(t, st, Delivery{ID: "dl", Attempt: 1}, DeadLettered(Attempt{Attempt: 1, ErrorClass: "logic_error", ClassifiedBy: "structure"}, "not_retryable"))
		v = get(t, st, "dl")
		require.Equal(t, "structure", v.ClassifiedBy)
		require.Equal(t, "structure", v.History[len(v.History)-1].ClassifiedBy)
		require.NoError(t, st.Requeued(ctx, Delivery{ID: "dl", Run: 1, Seed: seed()}, 1, nil, Event{Event: EventRequeued}))
		require.Empty(t, get(t, st, "dl").ClassifiedBy)

		// A cancel clears it.
		create(t, st, "cc")
		apply(t, st, Delivery{ID: "cc", Attempt: 1}, Retrying(Attempt{Attempt: 1, ErrorClass: "timeout", ClassifiedBy: "structure"}, time.Minute, t0))
		_, err = st.Cancel(ctx, "cc", "stop")
		require.NoError(t, err)
		require.Empty(t, get(t, st, "cc").ClassifiedBy)
	})
}
