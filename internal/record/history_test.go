package record

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestHistoryBounded (#11 item 8), on miniredis and a real redis-server:
// repeated deferrals are one event with a count (the last one's time and
// error, the first one's time as since); a history longer than
// HistoryHead + 1 + HistoryTail keeps its first and last events and one
// EventElided event counting what it replaces and the attempt outcomes
// among them; a deferral after other events is a new event; the record of
// a deferral outlives its delay; and the events' seq numbers go up
// throughout. Alike for a record created with its history list (Create)
// and for one that holds its first event (EnqueueNewCall: the bounds
// count it).
func TestHistoryBounded(t *testing.T) {
	for _, holds := range []bool{false, true} {
		t.Run(fmt.Sprintf("record holds first event %v", holds), func(t *testing.T) {
			testHistoryBounded(t, holds)
		})
	}
}

func testHistoryBounded(t *testing.T, holdsFirst bool) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, _ *Store) {
		ctx := context.Background()
		now := t0
		st := NewStore(rdb, WithRetention(time.Hour), WithClock(func() time.Time { return now }))
		if holdsFirst {
			c := st.EnqueueNewCall(New{ID: "long", Seed: seed(), State: StatePending},
				broker.AsynqTask{Type: "agentq:task", Payload: []byte(`{}`), ID: "long", Queue: "default", Timeout: time.Hour}, broker.Lane{}, now)
			code, _, err := EnqueueReply(c.Script.Run(ctx, rdb, c.Keys, c.Args...).Result())
			require.NoError(t, err)
			require.Equal(t, CodeApplied, code)
			require.True(t, rdb.HExists(ctx, rkeys.Task("long"), FieldFirstEvent).Val())
		} else {
			create(t, st, "long")
		}
		d := Delivery{ID: "long", Attempt: 1, Seed: seed()}
		increasing := func(v *View) {
			t.Helper()
			for i := 1; i < len(v.History); i++ {
				require.Greater(t, v.History[i].Seq, v.History[i-1].Seq, "seq at %d", i)
			}
		}

		// An outage: 500 deferrals in a row are one event.
		for i := range 500 {
			now = t0.Add(time.Duration(i+1) * time.Second)
			require.Equal(t, Applied, apply(t, st, d, Deferred(Attempt{Agent: "llm"}, WaitingBreaker, fmt.Sprint("breaker open ", i), 2*time.Second)))
		}
		v := get(t, st, "long")
		require.Len(t, v.History, 2)
		def := v.History[1]
		require.Equal(t, EventDeferred, def.Event)
		require.Equal(t, 500, def.Count)
		require.Equal(t, t0.Add(time.Second), def.Since.UTC(), "since: the first deferral")
		require.Equal(t, t0.Add(500*time.Second), def.At.UTC(), "at: the last one")
		require.Equal(t, "breaker open 499", def.Error)
		require.EqualValues(t, 2000, def.DelayMS)
		require.EqualValues(t, 501, def.Seq, "each merged deferral takes a new number")
		increasing(v)

		// 300 attempts (a task requeued again and again): bounded.
		for i := range 300 {
			now = t0.Add(time.Hour + time.Duration(i)*time.Second)
			d.Attempt = i + 1
			require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: i + 1, Agent: "llm"}, time.Second, now.Add(time.Second))))
		}
		// A deferral after other events is a new event again.
		now = t0.Add(2 * time.Hour)
		require.Equal(t, Applied, apply(t, st, d, Deferred(Attempt{}, WaitingLimit, "limits", time.Second)))
		v = get(t, st, "long")
		require.Len(t, v.History, HistoryHead+1+HistoryTail)
		total := 2 + 300 + 1
		require.Equal(t, EventQueued, v.History[0].Event, "the first events are kept")
		require.Equal(t, 500, v.History[1].Count)
		require.Equal(t, HistoryHead-2, v.History[HistoryHead-1].Attempt)
		el := v.History[HistoryHead]
		require.Equal(t, EventElided, el.Event)
		require.Equal(t, total-HistoryHead-HistoryTail, el.Count)
		require.Equal(t, el.Count, el.Attempts, "every elided event was an attempt outcome")
		require.False(t, el.At.IsZero())
		last := v.History[len(v.History)-1]
		require.Equal(t, EventDeferred, last.Event, "the last events are kept")
		require.Equal(t, 0, last.Count, "a new deferral, not merged")
		require.Equal(t, 300, v.History[len(v.History)-2].Attempt)
		require.EqualValues(t, 501+300+1, last.Seq)
		increasing(v)

		// A deferral's record lives for its delay plus the retention.
		require.Equal(t, Applied, apply(t, st, d, Deferred(Attempt{}, WaitingLimit, "limits", 3*time.Hour)))
		for _, k := range []string{rkeys.Task("long"), rkeys.TaskHistory("long")} {
			ttl, err := rdb.TTL(ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 3*time.Hour, k)
		}
		v = get(t, st, "long")
		require.Equal(t, 2, v.History[len(v.History)-1].Count, "merged into the last deferral")
		require.EqualValues(t, 501+300+2, v.History[len(v.History)-1].Seq)
		increasing(v)
	})
}
