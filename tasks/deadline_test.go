package tasks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// requireDeadlineField: err is a *ValidationError naming field "deadline".
func requireDeadlineField(t *testing.T, err error, msg string) {
	t.Helper()
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "%s: %v is not a *ValidationError", msg, err)
	require.Equal(t, "deadline", ve.Field, "%s: %v", msg, err)
	require.ErrorIs(t, err, ErrInvalidEnvelope)
}

// TestParseDeadline: a deadline is a positive Go duration from now or an
// RFC 3339 time; anything else names the field.
func TestParseDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "30s", want: now.Add(30 * time.Second)},
		{in: "1h30m", want: now.Add(90 * time.Minute)},
		{in: "2026-11-25T08:00:00Z", want: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)},
		{in: "2026-11-25T09:00:00.5+01:00", want: time.Date(2026, 11, 25, 8, 0, 0, 5e8, time.UTC)},
		{in: "0s", bad: true},
		{in: "-5s", bad: true},
		{in: "30", bad: true},
		{in: "tomorrow", bad: true},
		{in: "2026-11-25 08:00:00", bad: true},
	} {
		got, err := ParseDeadline(tc.in, now)
		if tc.bad {
			requireDeadlineField(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.True(t, tc.want.Equal(got), "%s: got %s", tc.in, got)
	}
}

// TestCheckDeadline: a deadline must be in the future, after the first
// run is due, and at most MaxDelay away.
func TestCheckDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	require.NoError(t, CheckDeadline(time.Time{}, now, time.Hour), "no deadline")
	require.NoError(t, CheckDeadline(now.Add(time.Second), now, 0))
	require.NoError(t, CheckDeadline(now.Add(2*time.Hour), now, time.Hour))
	requireDeadlineField(t, CheckDeadline(now, now, 0), "now")
	requireDeadlineField(t, CheckDeadline(now.Add(-time.Second), now, 0), "past")
	requireDeadlineField(t, CheckDeadline(now.Add(time.Minute), now, time.Hour), "before the first run is due")
	requireDeadlineField(t, CheckDeadline(now.Add(MaxDelay+time.Hour), now, 0), "too far")
}

// TestRequestDeadline: the deadline of a producer's JSON task (POST
// /api/v1/tasks, enqueuer --file) becomes the task's; a bad one names the
// field.
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	before := time.Now()
	tk, _, err := Request{Agent: "a", Deadline: "30s"}.Task(nil)
	require.NoError(t, err)
	require.WithinRange(t, tk.Deadline, before.Add(30*time.Second), time.Now().Add(30*time.Second))
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	tk, _, err = Request{Agent: "a", Deadline: at.Format(time.RFC3339)}.Task(nil)
	require.NoError(t, err)
	require.True(t, at.Equal(tk.Deadline))
	for _, r := range []Request{
		{Agent: "a", Deadline: "soon"},
		{Agent: "a", Deadline: "-1s"},
		{Agent: "a", Deadline: "2001-01-01T00:00:00Z"},
		{Agent: "a", Deadline: "1m", In: "5m"},
	} {
		_, _, err := r.Task(nil)
		requireDeadlineField(t, err, r.Deadline)
	}
}

// TestEnqueueDeadline: a deadline (Task.Deadline, Within: the earlier
// wins) travels in the envelope, is shown in the record and is in the
// deadline index, on every enqueue path (a caller's ID, a generated one,
// EnqueueMany); a bad one is refused with nothing written.
func TestEnqueueDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	c := NewClient(rdb)
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	check := func(id string, want time.Time) {
		t.Helper()
		env := mustEnvelope(t, rdb, id)
		require.Equal(t, want.UnixMilli(), env.Deadline, id)
		v, err := c.Store().Get(ctx, id)
		require.NoError(t, err)
		got, err := time.Parse(time.RFC3339Nano, v.Deadline)
		require.NoError(t, err, "%s: the task JSON shows its deadline", id)
		require.Equal(t, want.UnixMilli(), got.UnixMilli(), id)
		score, err := rdb.ZScore(ctx, rkeys.Deadlines(), id).Result()
		require.NoError(t, err, "%s is in the deadline index", id)
		require.Equal(t, float64(want.UnixMilli()), score, id)
	}
	_, err := c.Enqueue(ctx, Task{ID: "caller", Agent: "tool", Deadline: later})
	require.NoError(t, err)
	check("caller", later)
	res, err := c.Enqueue(ctx, Task{Agent: "tool", Deadline: later.Add(time.Hour)}, Within(time.Hour))
	require.NoError(t, err)
	env := mustEnvelope(t, rdb, res.ID)
	require.WithinDuration(t, later, time.UnixMilli(env.Deadline), 5*time.Second, "Within's earlier deadline wins")
	check(res.ID, time.UnixMilli(env.Deadline))
	_, err = c.EnqueueMany(ctx, []Task{{ID: "many-1", Agent: "tool", Deadline: later}, {ID: "many-2", Agent: "tool"}})
	require.NoError(t, err)
	check("many-1", later)
	_, err = rdb.ZScore(ctx, rkeys.Deadlines(), "many-2").Result()
	require.ErrorIs(t, err, redis.Nil, "a task without a deadline is not indexed")
	require.Zero(t, mustEnvelope(t, rdb, "many-2").Deadline)

	n, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		task Task
		opts []EnqueueOption
	}{
		{"past", Task{ID: "bad-1", Agent: "tool", Deadline: time.Now().Add(-time.Second)}, nil},
		{"negative Within", Task{ID: "bad-2", Agent: "tool"}, []EnqueueOption{Within(-time.Second)}},
		{"before the first run", Task{ID: "bad-3", Agent: "tool"}, []EnqueueOption{Within(time.Minute), ProcessIn(time.Hour)}},
	} {
		_, err := c.Enqueue(ctx, tc.task, tc.opts...)
		requireDeadlineField(t, err, tc.name)
		_, err = c.EnqueueMany(ctx, []Task{tc.task}, tc.opts...)
		requireDeadlineField(t, err, tc.name+" (EnqueueMany)")
		ok, err := c.Store().Exists(ctx, tc.task.ID)
		require.NoError(t, err)
		require.False(t, ok, tc.name)
	}
	after, err := rdb.ZCard(ctx, rkeys.Deadlines()).Result()
	require.NoError(t, err)
	require.Equal(t, n, after, "a refused task is not indexed")
}

// TestEnvelopeDeadlineRoundTrip: the deadline survives Encode and Decode
// (the fast path and encoding/json agree on it).
func TestEnvelopeDeadlineRoundTrip(t *testing.T) {
	t.Parallel()
	env := &Envelope{ID: "a", Agent: "t", Queue: DefaultQueue, EnqueuedAt: time.Now().UTC(), Deadline: 1795465955500}
	b, err := Encode(env)
	require.NoError(t, err)
	require.Contains(t, string(b), `"deadline_ms":1795465955500`)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, env.Deadline, got.Deadline)
	require.True(t, got.PastDeadline(time.UnixMilli(1795465955500)))
	require.False(t, got.PastDeadline(time.UnixMilli(1795465955499)))
	_, err = Decode([]byte(`{"id":"a","agent":"t","deadline_ms":-1}`))
	require.ErrorIs(t, err, ErrInvalidEnvelope)
}
