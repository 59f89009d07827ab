package tasks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestHistoryBounded (#11 item 8), on miniredis and a real redis-server:
// repeated deferrals are one event with a count; a history longer than
// HistoryHead + 1 + HistoryTail keeps its first and last events and one
// EventElided event counting what it replaces; and the record of a
// deferral outlives its delay.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			st := NewStore(rdb, WithRetention(time.Hour))
			env := &Envelope{ID: "long", Agent: "llm", Queue: DefaultQueue, EnqueuedAt: t0}
			_, err := st.Create(ctx, env, StatePending, Event{At: t0, Event: EventQueued})
			require.NoError(t, err)

			// An outage: 500 deferrals in a row are one event.
			for i := range 500 {
				require.NoError(t, st.Transition(ctx, "long", Patch{State: StateDeferred},
					Event{At: t0.Add(time.Duration(i+1) * time.Second), Event: EventDeferred, Agent: "llm", DelayMS: 2000, Error: fmt.Sprint("breaker open ", i)}))
			}
			v, err := st.Get(ctx, "long")
			require.NoError(t, err)
			require.Len(t, v.History, 2)
			d := v.History[1]
			require.Equal(t, EventDeferred, d.Event)
			require.Equal(t, 500, d.Count)
			require.Equal(t, t0.Add(time.Second), d.Since.UTC(), "since: the first deferral")
			require.Equal(t, t0.Add(500*time.Second), d.At.UTC(), "at: the last one")
			require.Equal(t, "breaker open 499", d.Error)

			// 300 attempts (a task requeued again and again): bounded.
			for i := range 300 {
				require.NoError(t, st.Transition(ctx, "long", Patch{State: StateRetrying},
					Event{At: t0.Add(time.Hour + time.Duration(i)*time.Second), Event: EventRetrying, Attempt: i + 1, Agent: "llm"}))
			}
			// A deferral after other events is a new event again.
			require.NoError(t, st.Transition(ctx, "long", Patch{State: StateDeferred}, Event{At: t0.Add(2 * time.Hour), Event: EventDeferred}))
			v, err = st.Get(ctx, "long")
			require.NoError(t, err)
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
			require.Equal(t, 0, last.Count)
			require.Equal(t, 300, v.History[len(v.History)-2].Attempt)

			// A deferral's record lives for its delay plus the retention.
			require.NoError(t, st.Transition(ctx, "long", Patch{State: StateDeferred}, Event{Event: EventDeferred, DelayMS: (3 * time.Hour).Milliseconds()}))
			ttl, err := rdb.TTL(ctx, rkeys.Task("long")).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 3*time.Hour)
		})
	}
}
