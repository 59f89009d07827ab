package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestStep: a step is recorded (data in the steps hash, the record's
// count and bytes, its usage added to the task's, a history event step
// with its name, size and usage), a name recorded again keeps the first,
// Steps reads them, and a later start of an attempt answers the count
// (ApplyStart), on miniredis and a real redis-server.
func TestStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "s1")
		d := Delivery{ID: "s1", Attempt: 1, Seed: seed()}
		out, info, err := st.ApplyStart(ctx, d, Started())
		n := info.Steps
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.Zero(t, n, "no steps yet")

		use := amount.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
		ok, err := st.Step(ctx, d, Step{Name: "plan", Data: json.RawMessage(`{"a":1}`), Usage: use})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = st.Step(ctx, d, Step{Name: "plan", Data: json.RawMessage(`{"a":2}`), Usage: use})
		require.NoError(t, err)
		require.False(t, ok, "a name recorded again keeps the first")
		ok, err = st.Step(ctx, d, Step{Name: "call", Data: json.RawMessage(`"x"`)})
		require.NoError(t, err)
		require.True(t, ok)

		steps, err := st.Steps(ctx, "s1")
		require.NoError(t, err)
		require.Equal(t, map[string]json.RawMessage{"plan": json.RawMessage(`{"a":1}`), "call": json.RawMessage(`"x"`)}, steps)

		v := get(t, st, "s1")
		require.Equal(t, 2, v.Steps)
		require.NotNil(t, v.Usage)
		require.Equal(t, int64(15), v.Usage.TotalTokens, "the first step's usage only: the repeat wrote nothing")
		var evs []Event
		for _, ev := range v.History {
			if ev.Event == EventStep {
				evs = append(evs, ev)
			}
		}
		require.Len(t, evs, 2)
		require.Equal(t, "plan", evs[0].Name)
		require.Equal(t, 7, evs[0].Bytes)
		require.Equal(t, 1, evs[0].Attempt)
		require.NotNil(t, evs[0].Usage)
		require.Equal(t, int64(15), evs[0].Usage.TotalTokens)
		require.Equal(t, "call", evs[1].Name)
		require.Nil(t, evs[1].Usage)
		bytes, err := rdb.HGet(ctx, rkeys.Task("s1"), FieldStepsBytes).Int()
		require.NoError(t, err)
		require.Equal(t, 10, bytes)

		// The next attempt's start answers the count.
		d2 := Delivery{ID: "s1", Attempt: 2, Seed: seed()}
		out, info, err = st.ApplyStart(ctx, d2, Started())
		n = info.Steps
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.Equal(t, 2, n)

		// A task without steps: Steps is empty.
		empty, err := st.Steps(ctx, "none")
		require.NoError(t, err)
		require.Empty(t, empty)
	})
}

// TestStepRefused: a step of a stale run, of a run that has ended, of a
// canceled task or of a task with no record is refused and writes
// nothing, on miniredis and a real redis-server.
func TestStepRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		step := Step{Name: "s", Data: json.RawMessage(`1`)}
		refused := func(id string, d Delivery, want Outcome) {
			t.Helper()
			ok, err := st.Step(ctx, d, step)
			require.False(t, ok)
			require.ErrorIs(t, err, ErrStepRefused)
			var re *StepRefusedError
			require.True(t, errors.As(err, &re))
			require.Equal(t, want, re.Outcome, err.Error())
			n, err := rdb.Exists(ctx, rkeys.TaskSteps(id)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "nothing written")
		}

		// Stale: the record moved to run 1 (a restart); run 0's step is refused.
		create(t, st, "stale")
		d0 := Delivery{ID: "stale", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d0, Restarting(Attempt{Attempt: 1, ErrorClass: "timeout"}, NextRun{Run: 1}, time.Second)))
		refused("stale", d0, Stale)

		// Ended: the run succeeded.
		create(t, st, "ended")
		d := Delivery{ID: "ended", Attempt: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Succeeded(Attempt{Attempt: 1}, nil)))
		refused("ended", d, Ended)

		// Canceled.
		create(t, st, "canceled")
		_, err := st.Cancel(ctx, "canceled", "no")
		require.NoError(t, err)
		refused("canceled", Delivery{ID: "canceled", Attempt: 1, Seed: seed()}, Canceled)

		// No record.
		refused("missing", Delivery{ID: "missing", Attempt: 1, Seed: seed()}, Ended)
	})
}

// TestStepCaps: each cap (steps per task, bytes per step, bytes per task)
// refuses the step over it with an error naming the cap, writing
// nothing, on miniredis and a real redis-server.
func TestStepCaps(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		capOf := func(err error) *StepCapError {
			t.Helper()
			var ce *StepCapError
			require.True(t, errors.As(err, &ce), "%v", err)
			return ce
		}

		// Bytes per step: refused before Redis, and by the script.
		create(t, st, "big")
		d := Delivery{ID: "big", Attempt: 1, Seed: seed()}
		big := json.RawMessage(`"` + strings.Repeat("x", MaxStepBytes) + `"`)
		ok, err := st.Step(ctx, d, Step{Name: "big", Data: big})
		require.False(t, ok)
		ce := capOf(err)
		require.Equal(t, "step_bytes", ce.Cap)
		require.Contains(t, err.Error(), "per step")

		// Count.
		create(t, st, "many")
		d = Delivery{ID: "many", Attempt: 1, Seed: seed()}
		for i := range MaxSteps {
			ok, err := st.Step(ctx, d, Step{Name: fmt.Sprint("s", i), Data: json.RawMessage(`1`)})
			require.NoError(t, err)
			require.True(t, ok)
		}
		ok, err = st.Step(ctx, d, Step{Name: "one-more", Data: json.RawMessage(`1`)})
		require.False(t, ok)
		ce = capOf(err)
		require.Equal(t, "steps", ce.Cap)
		require.Equal(t, int64(MaxSteps), ce.Limit)
		require.Contains(t, err.Error(), "most steps")
		ok, err = st.Step(ctx, d, Step{Name: "s0", Data: json.RawMessage(`2`)})
		require.NoError(t, err, "a repeat of a recorded step is no new step")
		require.False(t, ok)
		require.Equal(t, MaxSteps, get(t, st, "many").Steps)

		// Bytes per task.
		create(t, st, "heavy")
		d = Delivery{ID: "heavy", Attempt: 1, Seed: seed()}
		chunk := json.RawMessage(`"` + strings.Repeat("y", MaxStepBytes-2) + `"`)
		for i := range MaxStepsBytes / MaxStepBytes {
			ok, err := st.Step(ctx, d, Step{Name: fmt.Sprint("c", i), Data: chunk})
			require.NoError(t, err)
			require.True(t, ok)
		}
		ok, err = st.Step(ctx, d, Step{Name: "over", Data: json.RawMessage(`1`)})
		require.False(t, ok)
		ce = capOf(err)
		require.Equal(t, "task_bytes", ce.Cap)
		require.Equal(t, int64(MaxStepsBytes), ce.Limit)
		exists, err := rdb.HExists(ctx, rkeys.TaskSteps("heavy"), "over").Result()
		require.NoError(t, err)
		require.False(t, exists)
	})
}

// TestStepLifetime: the steps hash lives as long as the record: a step
// gives it the record's lifetime, and a later write that refreshes the
// record's refreshes the steps hash's too (real redis-server: TTLs).
func TestStepLifetime(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "life")
		d := Delivery{ID: "life", Attempt: 1, Seed: seed()}
		_, err := st.Step(ctx, d, Step{Name: "a", Data: json.RawMessage(`1`)})
		require.NoError(t, err)
		ttl := func(key string) time.Duration {
			v, err := rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			return v
		}
		require.Greater(t, ttl(rkeys.TaskSteps("life")), 50*time.Minute, "the record's lifetime (an hour)")

		require.NoError(t, rdb.Expire(ctx, rkeys.Task("life"), 10*time.Minute).Err())
		require.NoError(t, rdb.Expire(ctx, rkeys.TaskSteps("life"), 10*time.Minute).Err())
		require.Equal(t, Applied, apply(t, st, d, Retrying(Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Second, t0.Add(time.Second))))
		require.Greater(t, ttl(rkeys.Task("life")), 50*time.Minute, "refreshed")
		require.Greater(t, ttl(rkeys.TaskSteps("life")), 50*time.Minute, "refreshed with it")

		require.NoError(t, rdb.Expire(ctx, rkeys.TaskSteps("life"), 10*time.Minute).Err())
		_, err = st.Cancel(ctx, "life", "")
		require.NoError(t, err)
		require.Greater(t, ttl(rkeys.TaskSteps("life")), 50*time.Minute, "a cancel sets it too")
	})
}

// TestStepOfWebhookTask: a step of a task that names webhooks goes in its
// outbox with its event, also when the delivery did not say so (the script
// asks for the outbox's keys); a repeated name writes nothing, in the
// outbox neither, whether or not the delivery names the webhooks.
func TestStepOfWebhookTask(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	st := NewStore(rdb)
	ctx := context.Background()
	hooked := seed()
	hooked.Notify = []string{"billing"}
	_, err := st.Create(ctx, New{ID: "w", Seed: hooked, State: StatePending})
	require.NoError(t, err)
	bare := Delivery{ID: "w", Attempt: 1, Seed: seed()} // the delivery does not know of the webhooks
	_, _, err = st.ApplyStart(ctx, bare, Started())
	require.NoError(t, err)
	ok, err := st.Step(ctx, bare, Step{Name: "plan", Data: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.True(t, ok)
	for _, d := range []Delivery{bare, {ID: "w", Attempt: 1, Seed: hooked}} {
		ok, err = st.Step(ctx, d, Step{Name: "plan", Data: json.RawMessage(`2`)})
		require.NoError(t, err)
		require.False(t, ok, "a name recorded already keeps the first")
	}
	require.Equal(t, []string{"step"}, outbox(t, rdb, "w")[len(outbox(t, rdb, "w"))-1:])
	n := 0
	for _, ev := range outbox(t, rdb, "w") {
		if ev == EventStep {
			n++
		}
	}
	require.Equal(t, 1, n, "one step event in the outbox")
	steps, err := st.Steps(ctx, "w")
	require.NoError(t, err)
	require.JSONEq(t, `1`, string(steps["plan"]))
	require.Equal(t, 1, get(t, st, "w").Steps)
}
