package record

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestEventsAnnounced: every event a script records is announced on the
// task's shard channel, as stored (seq included, a merged deferral with its
// count), in the same step; a write that is not applied announces nothing.
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
	require.Equal(t, Event{Seq: 1, Event: EventQueued}, Event{Seq: next().Seq, Event: EventQueued})
	d := Delivery{ID: "a", Attempt: 1}
	apply(t, st, d, Deferred(Attempt{}, "breaker open", time.Second))
	apply(t, st, d, Deferred(Attempt{}, "breaker open", time.Second))
	require.EqualValues(t, 2, next().Seq)
	merged := next()
	require.EqualValues(t, 3, merged.Seq)
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
