package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
)

// suspend writes the Waiting change of attempt 1 of run 0 of task id:
// a wait for signal (none: a sleep) whose next run is 1.
func suspend(t *testing.T, st *Store, id, signal string) StartInfo {
	t.Helper()
	kind := "sleep"
	if signal != "" {
		kind = "signal"
	}
	w := Wait{JSON: json.RawMessage(fmt.Sprintf(`{"kind":%q,"signal":%q,"due":"2030-01-01T00:00:00Z"}`, kind, signal)),
		Signal: signal, Resumes: 1}
	d := Delivery{ID: id, Attempt: 1, Seed: seed()}
	out, info, err := st.ApplyStart(context.Background(), d, Waiting(Attempt{Attempt: 1, Agent: "llm"}, NextRun{Run: 1}, w, time.Minute))
	require.NoError(t, err)
	require.Equal(t, Applied, out)
	return info
}

// resume writes the start of attempt n of run 1 of task id.
func resume(t *testing.T, st *Store, id string, n int) StartInfo {
	t.Helper()
	out, info, err := st.ApplyStart(context.Background(), Delivery{ID: id, Run: 1, Attempt: n, Seed: seed()}, Started())
	require.NoError(t, err)
	require.Equal(t, Applied, out)
	return info
}

func eventsOf(v *View, kind string) []Event {
	var out []Event
	for _, ev := range v.History {
		if ev.Event == kind {
			out = append(out, ev)
		}
	}
	return out
}

// TestWaitSignal: a run suspended for a signal moves the record to the
// next run in state waiting (event waiting with the wait); the signal says
// the task waits for it (Resume, with the run and queue), a second send is
// a duplicate that says so too; the resumed run's start decides "signal"
// (event resumed) once, and every start of that run answers the wait, its
// outcome and the signal count.
func TestWaitSignal(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "w1")
		require.False(t, suspend(t, st, "w1", "approve").SignalReady)
		v := get(t, st, "w1")
		require.Equal(t, StateWaiting, v.State)
		require.Equal(t, 1, v.Run)
		require.Equal(t, 1, v.Resumes)
		wev := eventsOf(v, EventWaiting)
		require.Len(t, wev, 1)
		require.JSONEq(t, `{"kind":"signal","signal":"approve","due":"2030-01-01T00:00:00Z"}`, string(wev[0].Wait))
		require.Equal(t, int64(60000), wev[0].DelayMS)

		res, err := st.Signal(ctx, "w1", "other", json.RawMessage(`1`))
		require.NoError(t, err)
		require.Equal(t, SignalResult{State: StateWaiting, Run: 1, Queue: "default"}, res, "not the signal waited for")
		res, err = st.Signal(ctx, "w1", "approve", json.RawMessage(`{"ok":true}`))
		require.NoError(t, err)
		require.Equal(t, SignalResult{State: StateWaiting, Resume: true, Run: 1, Queue: "default"}, res)
		res, err = st.Signal(ctx, "w1", "approve", json.RawMessage(`{"ok":false}`))
		require.NoError(t, err)
		require.True(t, res.Duplicate)
		require.True(t, res.Resume, "a retried send still completes the resume")

		info := resume(t, st, "w1", 1)
		require.Equal(t, WaitSignal, info.WaitOutcome)
		require.True(t, info.Resumed)
		require.Equal(t, 2, info.Signals)
		require.JSONEq(t, string(wev[0].Wait), string(info.Wait))
		info = resume(t, st, "w1", 2)
		require.Equal(t, WaitSignal, info.WaitOutcome, "a retry of the resumed run gets the same wait")
		require.False(t, info.Resumed)

		v = get(t, st, "w1")
		require.Equal(t, StateActive, v.State)
		require.Equal(t, 2, v.Signals)
		rev := eventsOf(v, EventResumed)
		require.Len(t, rev, 1, "decided once")
		require.Equal(t, 1, rev[0].Resume)
		require.Equal(t, WaitSignal, rev[0].By)
		require.Len(t, eventsOf(v, EventSignal), 2, "the duplicate wrote nothing")
		require.Equal(t, "approve", eventsOf(v, EventSignal)[1].Name)
		var w map[string]any
		require.NoError(t, json.Unmarshal(v.Wait, &w))
		require.Equal(t, false, w["timed_out"])

		sigs, err := st.Signals(ctx, "w1")
		require.NoError(t, err)
		require.Equal(t, map[string]json.RawMessage{"approve": json.RawMessage(`{"ok":true}`), "other": json.RawMessage(`1`)}, sigs)
	})
}

// TestWaitTimeoutAndTimer: a signal wait whose run starts without the
// signal timed out; a sleep ends by its timer; a task that never got a
// signal nor suspended answers nothing more at its start.
func TestWaitTimeoutAndTimer(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "to")
		suspend(t, st, "to", "approve")
		require.Equal(t, WaitTimeout, resume(t, st, "to", 1).WaitOutcome)
		var w map[string]any
		require.NoError(t, json.Unmarshal(get(t, st, "to").Wait, &w))
		require.Equal(t, true, w["timed_out"])

		create(t, st, "sl")
		suspend(t, st, "sl", "")
		info := resume(t, st, "sl", 1)
		require.Equal(t, WaitTimer, info.WaitOutcome)
		require.Equal(t, WaitTimer, eventsOf(get(t, st, "sl"), EventResumed)[0].By)

		create(t, st, "plain")
		out, info, err := st.ApplyStart(context.Background(), Delivery{ID: "plain", Attempt: 1, Seed: seed()}, Started())
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.Equal(t, StartInfo{}, info)
	})
}

// TestSignalBeforeWait: a signal sent before the run suspends is kept,
// and the suspend's write says it is there (SignalReady).
func TestSignalBeforeWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "early")
		res, err := st.Signal(context.Background(), "early", "go", nil)
		require.NoError(t, err)
		require.Equal(t, StatePending, res.State)
		require.False(t, res.Resume)
		require.True(t, suspend(t, st, "early", "go").SignalReady)
		require.Equal(t, WaitSignal, resume(t, st, "early", 1).WaitOutcome)
		sigs, err := st.Signals(context.Background(), "early")
		require.NoError(t, err)
		require.Equal(t, json.RawMessage(`null`), sigs["go"], "an empty body is null")
	})
}

// TestSignalRefused: no record, an ended or canceled task, a bad name or
// data, too large, over the cap: nothing written, a typed error.
func TestSignalRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		_, err := st.Signal(ctx, "nope", "a", nil)
		require.ErrorIs(t, err, ErrNotFound)

		create(t, st, "r")
		for _, name := range []string{"", "a b", "é", strings.Repeat("a", MaxSignalName+1)} {
			_, err = st.Signal(ctx, "r", name, nil)
			require.ErrorIs(t, err, ErrSignalInvalid, name)
		}
		_, err = st.Signal(ctx, "r", "ok.name:1_-", json.RawMessage(`{`))
		require.ErrorIs(t, err, ErrSignalInvalid)
		_, err = st.Signal(ctx, "r", "big", json.RawMessage(`"`+strings.Repeat("x", MaxSignalBytes)+`"`))
		require.ErrorIs(t, err, ErrSignalTooLarge)
		for i := range MaxSignals {
			_, err = st.Signal(ctx, "r", fmt.Sprint("s", i), nil)
			require.NoError(t, err)
		}
		_, err = st.Signal(ctx, "r", "one-more", nil)
		require.ErrorIs(t, err, ErrSignalCap)
		require.Equal(t, MaxSignals, get(t, st, "r").Signals)

		create(t, st, "c")
		_, err = st.Cancel(ctx, "c", "")
		require.NoError(t, err)
		res, err := st.Signal(ctx, "c", "a", nil)
		require.ErrorIs(t, err, ErrTaskEnded)
		require.Equal(t, StateCanceled, res.State)
	})
}

// TestSignalLifetime: the signals hash lives as long as the record: the
// signal gives it the record's, and later writes refresh it with it.
func TestSignalLifetime(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "life")
		_, err := st.Signal(ctx, "life", "a", nil)
		require.NoError(t, err)
		ttl := func(key string) time.Duration {
			v, err := rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			return v
		}
		require.Greater(t, ttl(rkeys.TaskSignals("life")), 50*time.Minute)
		require.NoError(t, rdb.Expire(ctx, rkeys.Task("life"), 10*time.Minute).Err())
		require.NoError(t, rdb.Expire(ctx, rkeys.TaskSignals("life"), 10*time.Minute).Err())
		suspend(t, st, "life", "b")
		require.Greater(t, ttl(rkeys.TaskSignals("life")), 60*time.Minute, "refreshed with the record, delay included")
		require.NoError(t, rdb.Expire(ctx, rkeys.TaskSignals("life"), 10*time.Minute).Err())
		_, err = st.Cancel(ctx, "life", "")
		require.NoError(t, err)
		require.Greater(t, ttl(rkeys.TaskSignals("life")), 50*time.Minute, "a cancel sets it too")
	})
}

// TestResumeAfterDeferral: a resumed run deferred by its admission (no
// start) still decides the wait's outcome at its first start.
func TestResumeAfterDeferral(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		create(t, st, "df")
		suspend(t, st, "df", "")
		d := Delivery{ID: "df", Run: 1, Seed: seed()}
		require.Equal(t, Applied, apply(t, st, d, Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second)))
		require.Equal(t, StateDeferred, get(t, st, "df").State)
		info := resume(t, st, "df", 1)
		require.True(t, info.Resumed)
		require.Equal(t, WaitTimer, info.WaitOutcome)
	})
}

// TestWaitingRecovered: a worker started attempt 1 and died after
// scheduling the resume, before its Waiting write; the redelivery of that
// run (no worker, the dead attempt's number: delivery.recoverNext) writes
// it: the record waits at the next run with the wait, no lost attempt or
// restart is recorded, and a signal sent meanwhile answers SignalReady.
func TestWaitingRecovered(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "rec")
		require.Equal(t, Applied, apply(t, st, Delivery{ID: "rec", Attempt: 1, Worker: "dead", Seed: seed()}, Started()))
		_, err := st.Signal(ctx, "rec", "go", json.RawMessage(`1`))
		require.NoError(t, err)
		w := Wait{JSON: json.RawMessage(`{"kind":"signal","signal":"go","due":"2030-01-01T00:00:00Z"}`), Signal: "go", Resumes: 1}
		out, info, err := st.ApplyStart(ctx, Delivery{ID: "rec", Attempt: 1, Seed: seed()},
			Waiting(Attempt{Attempt: 1, Agent: "llm"}, NextRun{Run: 1}, w, time.Hour))
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.True(t, info.SignalReady, "the signal sent before the recovery resumes it")
		v, err := st.Get(ctx, "rec")
		require.NoError(t, err)
		require.Equal(t, StateWaiting, v.State)
		require.Equal(t, 1, v.Run)
		require.Equal(t, 1, v.Attempts)
		require.JSONEq(t, string(w.JSON), string(v.Wait))
		require.Len(t, eventsOf(v, EventWaiting), 1)
		require.Empty(t, eventsOf(v, EventRestarting))
		require.Empty(t, eventsOf(v, EventInterrupted))
		require.Equal(t, WaitSignal, resume(t, st, "rec", 1).WaitOutcome)
	})
}
