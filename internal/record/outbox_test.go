package record

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// outbox is task id's webhook outbox, decoded.
func outbox(t *testing.T, rdb redis.UniversalClient, id string) []string {
	t.Helper()
	raw, err := rdb.LRange(context.Background(), rkeys.TaskOutbox(id), 0, -1).Result()
	require.NoError(t, err)
	var out []string
	for _, e := range ParseEvents(raw) {
		out = append(out, e.Event)
	}
	return out
}

func dueScore(t *testing.T, rdb redis.UniversalClient, id string) (float64, bool) {
	t.Helper()
	s, err := rdb.ZScore(context.Background(), rkeys.WebhooksDue(), id).Result()
	if err == redis.Nil {
		return 0, false
	}
	require.NoError(t, err)
	return s, true
}

// TestOutboxWrittenWithTheEvent: a task that names webhooks has each event
// after its creation put in its webhook outbox, with the event's seq, by
// the same script that records it (Apply, ApplyAcked's rec_apply, Cancel,
// Requeued and a write that seeds the record, whether or not the write's
// delivery names the webhooks), and is made due in the
// webhooks' due set in that step (not a Cluster); a write that is not
// applied puts nothing there; a task that names none has no outbox and is
// never due.
func TestOutboxWrittenWithTheEvent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	st := NewStore(rdb, WithRetention(time.Hour), WithClock(func() time.Time { return t0 }))
	ctx := context.Background()
	hooked := seed()
	hooked.Notify = []string{"billing", "audit"}

	_, err := st.Create(ctx, New{ID: "n", Seed: hooked, State: StatePending})
	require.NoError(t, err)
	require.Empty(t, outbox(t, rdb, "n"), "the producer's own queued event is not a webhook event")
	_, due := dueScore(t, rdb, "n")
	require.False(t, due)

	d := Delivery{ID: "n", Attempt: 1, Seed: hooked}
	apply(t, st, d, Started())
	require.Empty(t, outbox(t, rdb, "n"), "a write without an event puts nothing")
	apply(t, st, d, Retrying(Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Second, t0.Add(time.Second)))
	require.Equal(t, []string{"retrying"}, outbox(t, rdb, "n"))
	score, due := dueScore(t, rdb, "n")
	require.True(t, due, "made due in the same step")
	require.InDelta(t, float64(time.Now().UnixMilli()), score, 60e3, "scored by the server's time: due tasks go in event order")
	// A task waiting for a retry of its deliveries is made due at once by a new event.
	require.NoError(t, rdb.ZAdd(ctx, rkeys.WebhooksDue(), redis.Z{Score: 5e12, Member: "n"}).Err())
	ok := Succeeded(Attempt{Attempt: 2, Agent: "llm"}, nil)
	// A delivery whose seed does not name the webhooks (its write comes
	// without the outbox's keys): the record does, and the write is sent
	// again with them.
	d.Attempt, d.Seed = 2, seed()
	apply(t, st, d, ok)
	apply(t, st, d, ok) // sent again: recorded once
	require.Equal(t, []string{"retrying", "succeeded"}, outbox(t, rdb, "n"))
	score, _ = dueScore(t, rdb, "n")
	require.InDelta(t, float64(time.Now().UnixMilli()), score, 60e3, "made due now")
	raw, err := rdb.LIndex(ctx, rkeys.TaskOutbox("n"), -1).Result()
	require.NoError(t, err)
	ev := ParseEvents([]string{raw})[0]
	require.EqualValues(t, 3, ev.Seq, "the outbox entry is the event as stored, seq included")
	require.Equal(t, t0, ev.At)
	ttl, err := rdb.TTL(ctx, rkeys.TaskOutbox("n")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 24*time.Hour)
	// Not applied (the run has ended): nothing more.
	require.Equal(t, Ended, apply(t, st, d, Retrying(Attempt{Attempt: 3}, time.Second, t0)))
	require.Len(t, outbox(t, rdb, "n"), 2)

	// Cancel.
	_, err = st.Create(ctx, New{ID: "c", Seed: hooked, State: StatePending})
	require.NoError(t, err)
	_, err = st.Cancel(ctx, "c", "no longer needed")
	require.NoError(t, err)
	require.Equal(t, []string{EventTaskCanceled}, outbox(t, rdb, "c"))
	_, due = dueScore(t, rdb, "c")
	require.True(t, due)

	// A write that seeds a missing record (the seed names the webhooks).
	apply(t, st, Delivery{ID: "s", Attempt: 1, Seed: hooked}, DeadLettered(Attempt{Attempt: 1, ErrorClass: "logic_error"}, "not_retryable"))
	require.Equal(t, []string{EventDeadLettered}, outbox(t, rdb, "s"))

	// Requeued.
	require.NoError(t, st.Requeued(ctx, Delivery{ID: "s", Run: 1, Seed: hooked}, 1, nil, Event{Event: EventRequeued}))
	require.Equal(t, []string{EventDeadLettered, EventRequeued}, outbox(t, rdb, "s"))

	// No webhooks: no outbox, never due, whatever happens.
	create(t, st, "plain")
	p := Delivery{ID: "plain", Attempt: 1, Seed: seed()}
	apply(t, st, p, Started())
	apply(t, st, p, Succeeded(Attempt{Attempt: 1}, nil))
	_, err = st.Create(ctx, New{ID: "plain2", Seed: seed(), State: StatePending})
	require.NoError(t, err)
	_, err = st.Cancel(ctx, "plain2", "")
	require.NoError(t, err)
	for _, id := range []string{"plain", "plain2"} {
		n, err := rdb.Exists(ctx, rkeys.TaskOutbox(id)).Result()
		require.NoError(t, err)
		require.Zero(t, n, id)
		_, due := dueScore(t, rdb, id)
		require.False(t, due, id)
	}
}

// TestOutboxOnCluster: on a Redis Cluster the script writes the outbox in
// the task's slot and the store makes the task due right after (the due
// set lives in another slot).
func TestOutboxOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	rdb := c.Client(t)
	st := NewStore(rdb, WithRetention(time.Hour))
	ctx := context.Background()
	hooked := seed()
	hooked.Notify = []string{"billing"}
	for _, id := range []string{"a", "b", "c", "d"} {
		_, err := st.Create(ctx, New{ID: id, Seed: hooked, State: StatePending})
		require.NoError(t, err)
		apply(t, st, Delivery{ID: id, Attempt: 1, Seed: hooked}, Succeeded(Attempt{Attempt: 1}, nil))
		require.Equal(t, []string{EventSucceeded}, outbox(t, rdb, id))
		_, due := dueScore(t, rdb, id)
		require.True(t, due, id)
	}
}
