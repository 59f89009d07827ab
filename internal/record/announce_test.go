package record

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestEventsAnnounced: once a task is watched, every event a script
// records is announced on the task's shard channel, as stored (seq
// included, a merged deferral with its count), in the same step; a write
// that is not applied announces nothing, nor does an unwatched task.
// A dead letter's reason is in the task's JSON.
func TestEventsAnnounced(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	st := NewStore(rdb)
	ctx := context.Background()
	sub := rdb.SSubscribe(ctx, rkeys.TaskEvents("a"))
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	ch := sub.Channel()
	next := func() Event {
		t.Helper()
		select {
		case m := <-ch:
			var ev Event
			require.NoError(t, json.Unmarshal([]byte(m.Payload), &ev), m.Payload)
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no announcement")
		}
		return Event{}
	}
	create(t, st, "a")
	d := Delivery{ID: "a", Attempt: 1}
	// Not watched yet: not announced (the marker comes first).
	apply(t, st, d, Started())
	apply(t, st, d, CallFailed(Attempt{Attempt: 1, ErrorClass: "timeout"}))
	require.NoError(t, rdb.SPublish(ctx, rkeys.TaskEvents("a"), `{"seq":0,"event":"marker"}`).Err())
	require.Equal(t, "marker", next().Event, "an unwatched task's events are not announced")
	require.NoError(t, st.Watch(ctx, "a"))
	require.ErrorIs(t, st.Watch(ctx, "nope"), ErrNotFound)
	apply(t, st, d, Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second))
	apply(t, st, d, Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second))
	require.EqualValues(t, 3, next().Seq)
	merged := next()
	require.EqualValues(t, 4, merged.Seq)
	require.Equal(t, 2, merged.Count, "the merged deferral, as stored")
	dl := DeadLettered(Attempt{Attempt: 1, ErrorClass: "invalid_request"}, "not_retryable")
	apply(t, st, d, dl)
	ev := next()
	require.Equal(t, EventDeadLettered, ev.Event)
	require.Equal(t, "not_retryable", ev.Reason)
	require.Equal(t, Ended, apply(t, st, d, Succeeded(Attempt{Attempt: 1}, nil)))
	// The next announcement is the test's own marker, not the refused write.
	require.NoError(t, rdb.SPublish(ctx, rkeys.TaskEvents("a"), `{"seq":99,"event":"marker"}`).Err())
	require.Equal(t, "marker", next().Event, "a write that was not applied was announced")
	v := get(t, st, "a")
	require.Equal(t, "not_retryable", v.Reason)
}

// TestOutput: live output events take numbers from the record's sequence
// (between its history events), are announced, stay within the caps with
// one truncation marker, and are refused once the run has ended.
func TestOutput(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "o")
		d := Delivery{ID: "o", Attempt: 1}
		out, kept, err := st.Output(ctx, d, []Event{{Event: EventProgress, Data: json.RawMessage(`{"pct":10}`)},
			{Event: EventOutput, Data: json.RawMessage(`"hello"`)}})
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.Equal(t, 2, kept)
		apply(t, st, d, Retrying(Attempt{Attempt: 1}, time.Millisecond, t0))
		big := make([]Event, MaxOutputEvents)
		for i := range big {
			big[i] = Event{Event: EventOutput, Data: json.RawMessage(`"x"`)}
		}
		_, kept, err = st.Output(ctx, d, big)
		require.NoError(t, err)
		require.Equal(t, MaxOutputEvents-2, kept)
		evs, state, err := st.Events(ctx, "o", 0)
		require.NoError(t, err)
		require.Equal(t, StateRetrying, state)
		require.Len(t, evs, 2+MaxOutputEvents+1)
		require.Equal(t, []string{EventQueued, EventProgress, EventOutput, EventRetrying}, []string{evs[0].Event, evs[1].Event, evs[2].Event, evs[3].Event})
		require.JSONEq(t, `{"pct":10}`, string(evs[1].Data))
		require.Equal(t, EventOutputTruncated, evs[len(evs)-1].Event)
		require.Equal(t, 1, evs[len(evs)-1].Attempt, "the marker names the attempt whose output went over")
		for i, ev := range evs {
			require.EqualValues(t, i+1, ev.Seq)
		}
		after, _, err := st.Events(ctx, "o", 3)
		require.NoError(t, err)
		require.EqualValues(t, 4, after[0].Seq)
		apply(t, st, d, Succeeded(Attempt{Attempt: 1}, nil))
		out, _, err = st.Output(ctx, d, []Event{{Event: EventOutput}})
		require.NoError(t, err)
		require.Equal(t, Ended, out)
	})
}

// TestEventsFromCursor: a follower's cursor on the output list reads each
// output event once, and what it gets equals Events' answer.
func TestEventsFromCursor(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "c")
		d := Delivery{ID: "c", Attempt: 1}
		_, _, err := st.Output(ctx, d, []Event{{Event: EventOutput, Data: json.RawMessage(`1`)}, {Event: EventOutput, Data: json.RawMessage(`2`)}})
		require.NoError(t, err)
		evs, _, cur, err := st.EventsFrom(ctx, "c", 0, 0)
		require.NoError(t, err)
		require.EqualValues(t, 2, cur)
		require.Len(t, evs, 3)
		apply(t, st, d, Retrying(Attempt{Attempt: 1}, time.Millisecond, t0))
		_, _, err = st.Output(ctx, d, []Event{{Event: EventProgress, Data: json.RawMessage(`3`)}})
		require.NoError(t, err)
		more, _, cur2, err := st.EventsFrom(ctx, "c", 3, cur)
		require.NoError(t, err)
		require.EqualValues(t, 3, cur2)
		all, _, err := st.Events(ctx, "c", 3)
		require.NoError(t, err)
		require.Equal(t, all, more)
		require.Equal(t, []string{EventRetrying, EventProgress}, []string{more[0].Event, more[1].Event})
	})
}
