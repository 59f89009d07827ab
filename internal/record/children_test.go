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

// waitFor makes parent's record wait at run (what slice 2's Waiting
// write does), after SetChildren stored kids in mode.
func waitFor(t *testing.T, rdb redis.UniversalClient, st *Store, parent string, run int, mode string, kids ...string) {
	t.Helper()
	ctx := context.Background()
	c := Children{Run: run, Mode: mode}
	for _, k := range kids {
		c.Kids = append(c.Kids, Child{ID: k, Name: "n-" + k, Spec: json.RawMessage(`{"id":"` + k + `"}`)})
	}
	stored, err := st.SetChildren(ctx, parent, c)
	require.NoError(t, err)
	require.True(t, stored)
	require.NoError(t, rdb.HSet(ctx, rkeys.Task(parent), FieldState, string(StateWaiting), FieldRun, run).Err())
}

// TestChildrenAll: SetChildren stores the list (View.Children, the repair
// index), a repeated wait of the same run keeps it, each child's end is
// recorded once (first write wins), the parent resumes exactly once, at
// the last child's end, and ChildEnds reads them in spawn order with the
// states of the children that have not ended.
func TestChildrenAll(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "p")
		waitFor(t, rdb, st, "p", 1, ModeAll, "p.1", "p.2", "p.3")
		stored, err := st.SetChildren(ctx, "p", Children{Run: 1, Mode: ModeAll, Kids: []Child{{ID: "x"}}})
		require.NoError(t, err)
		require.False(t, stored, "the same run's wait is kept")
		require.Equal(t, []string{"p.1", "p.2", "p.3"}, get(t, st, "p").Children)
		due, err := rdb.ZScore(ctx, rkeys.WaitingChildren(), "p").Result()
		require.NoError(t, err)
		require.Equal(t, float64(t0.Add(ChildRepairAfter).UnixMilli()), due)

		rs, rec, err := st.ChildEnded(ctx, "p", ChildEnd{ID: "p.2", State: StateSucceeded, Result: json.RawMessage(`{"v":2}`)})
		require.NoError(t, err)
		require.True(t, rec)
		require.False(t, rs.Due)
		_, rec, err = st.ChildEnded(ctx, "p", ChildEnd{ID: "p.2", State: StateDeadLettered})
		require.NoError(t, err)
		require.False(t, rec, "the first end wins")
		_, err = st.Create(ctx, New{ID: "p.3", Seed: seed(), State: StatePending})
		require.NoError(t, err)

		ends, err := st.ChildEnds(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, []ChildEnd{{ID: "p.1", Name: "n-p.1"},
			{ID: "p.2", Name: "n-p.2", State: StateSucceeded, Result: json.RawMessage(`{"v":2}`), Recorded: true},
			{ID: "p.3", Name: "n-p.3", State: StatePending}}, ends)

		rs, _, err = st.ChildEnded(ctx, "p", ChildEnd{ID: "p.1", State: StateCanceled, Error: "canceled"})
		require.NoError(t, err)
		require.False(t, rs.Due)
		rs, _, err = st.ChildEnded(ctx, "p", ChildEnd{ID: "p.3", State: StateDeadLettered, ErrorClass: "logic_error"})
		require.NoError(t, err)
		require.Equal(t, Resume{Due: true, Run: 1, Queue: "default", Mode: ModeAll}, rs, "the last end resumes")
		rs, _, err = st.ChildEnded(ctx, "p", ChildEnd{ID: "p.3", State: StateDeadLettered})
		require.NoError(t, err)
		require.False(t, rs.Due, "once per wait")

		rs, _, err = st.ChildEnded(ctx, "p", ChildEnd{})
		require.NoError(t, err)
		require.True(t, rs.Due, "the repair's look: answered but still waiting (a RunNow cut by a crash)")
		_, _, err = st.ChildEnded(ctx, "p", ChildEnd{ID: "other", State: StateSucceeded})
		require.ErrorIs(t, err, ErrNotAChild)
	})
}

// TestChildrenAny: in mode any the first success resumes; a parent that
// is not waiting (yet, or any more) is not resumed, and the repair's look
// finds a success recorded while it was not waiting.
func TestChildrenAny(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "q")
		stored, err := st.SetChildren(ctx, "q", Children{Run: 1, Mode: ModeAny, Kids: []Child{{ID: "a"}, {ID: "b"}, {ID: "c"}}})
		require.NoError(t, err)
		require.True(t, stored)
		rs, _, err := st.ChildEnded(ctx, "q", ChildEnd{ID: "a", State: StateSucceeded})
		require.NoError(t, err)
		require.False(t, rs.Due, "the parent is not waiting yet")
		require.NoError(t, rdb.HSet(ctx, rkeys.Task("q"), FieldState, string(StateWaiting), FieldRun, 1).Err())
		rs, _, err = st.ChildEnded(ctx, "q", ChildEnd{ID: "b", State: StateDeadLettered})
		require.NoError(t, err)
		require.False(t, rs.Due)
		rs, _, err = st.ChildEnded(ctx, "q", ChildEnd{})
		require.NoError(t, err)
		require.True(t, rs.Due, "the repair finds the success")
		rs, _, err = st.ChildEnded(ctx, "q", ChildEnd{ID: "c", State: StateSucceeded})
		require.NoError(t, err)
		require.False(t, rs.Due, "resumed once already")

		// A new wait at a later run replaces the last one.
		require.NoError(t, rdb.HSet(ctx, rkeys.Task("q"), FieldState, string(StateActive), FieldRun, 2).Err())
		waitFor(t, rdb, st, "q", 3, ModeAny, "d")
		_, _, err = st.ChildEnded(ctx, "q", ChildEnd{ID: "a", State: StateSucceeded})
		require.ErrorIs(t, err, ErrNotAChild, "a child of the last wait is not one of this")
		rs, _, err = st.ChildEnded(ctx, "q", ChildEnd{ID: "d", State: StateSucceeded})
		require.NoError(t, err)
		require.Equal(t, Resume{Due: true, Run: 3, Queue: "default", Mode: ModeAny}, rs)
		ends, err := st.ChildEnds(ctx, "q")
		require.NoError(t, err)
		require.Len(t, ends, 1)
	})
}

// TestSetChildrenRefused: a canceled, ended or newer parent stores no
// children.
func TestSetChildrenRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		_, err := st.SetChildren(ctx, "none", Children{Run: 1, Mode: ModeAll})
		require.ErrorIs(t, err, ErrChildrenRefused)
		create(t, st, "r")
		require.NoError(t, rdb.HSet(ctx, rkeys.Task("r"), FieldRun, 5).Err())
		_, err = st.SetChildren(ctx, "r", Children{Run: 1, Mode: ModeAll})
		var re *ChildrenRefusedError
		require.ErrorAs(t, err, &re)
		require.Equal(t, Stale, re.Outcome)
		require.NoError(t, rdb.HSet(ctx, rkeys.Task("r"), FieldState, string(StateCanceled)).Err())
		_, err = st.SetChildren(ctx, "r", Children{Run: 6, Mode: ModeAll})
		require.ErrorAs(t, err, &re)
		require.Equal(t, Canceled, re.Outcome)
	})
}

// TestChildEndBigResult: a child's result over MaxStoredResult is kept as
// its record keeps it: a note of its size.
func TestChildEndBigResult(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "big")
		waitFor(t, rdb, st, "big", 1, ModeAll, "k")
		huge := json.RawMessage(`"` + strings.Repeat("x", MaxStoredResult) + `"`)
		rs, _, err := st.ChildEnded(ctx, "big", ChildEnd{ID: "k", State: StateSucceeded, Result: huge})
		require.NoError(t, err)
		require.True(t, rs.Due)
		ends, err := st.ChildEnds(ctx, "big")
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(huge)), string(ends[0].Result))
	})
}

// suspendChildren makes task id wait (run 1) for children c1, c2 (mode
// all) as the delivery does: the wait stored (SetChildren), then the
// Waiting write of a children wait.
func suspendChildren(t *testing.T, st *Store, id string) {
	t.Helper()
	_, err := st.SetChildren(context.Background(), id, Children{Run: 1, Mode: ModeAll,
		Kids: []Child{{ID: id + ".c1", Spec: json.RawMessage(`{}`)}, {ID: id + ".c2", Spec: json.RawMessage(`{}`)}}})
	require.NoError(t, err)
	w := Wait{JSON: json.RawMessage(`{"kind":"children","children":2,"mode":"all","due":"2030-01-01T00:00:00Z"}`), Resumes: 1}
	out, _, err := st.ApplyStart(context.Background(), Delivery{ID: id, Attempt: 1, Seed: seed()},
		Waiting(Attempt{Attempt: 1, Agent: "llm"}, NextRun{Run: 1}, w, time.Minute))
	require.NoError(t, err)
	require.Equal(t, Applied, out)
}

// TestChildrenWaitOutcome: the resumed start of a children wait decides
// "children" when the children's end resumed it (child_end.lua marked
// it), else "timeout" (the timer came first), once; the wait's keys get
// the record's lifetime with its writes and a cancel.
func TestChildrenWaitOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		create(t, st, "all")
		suspendChildren(t, st, "all")
		for _, c := range []string{"all.c1", "all.c2"} {
			_, _, err := st.ChildEnded(ctx, "all", ChildEnd{ID: c, State: StateSucceeded})
			require.NoError(t, err)
		}
		info := resume(t, st, "all", 1)
		require.True(t, info.Resumed)
		require.Equal(t, WaitChildren, info.WaitOutcome)
		require.Equal(t, WaitChildren, resume(t, st, "all", 2).WaitOutcome, "every attempt of the run answers the same")

		create(t, st, "late")
		suspendChildren(t, st, "late")
		_, _, err := st.ChildEnded(ctx, "late", ChildEnd{ID: "late.c1", State: StateSucceeded})
		require.NoError(t, err)
		info = resume(t, st, "late", 1)
		require.Equal(t, WaitTimeout, info.WaitOutcome, "one child of two: the timer came first")
		rs, _, err := st.ChildEnded(ctx, "late", ChildEnd{ID: "late.c2", State: StateSucceeded})
		require.NoError(t, err)
		require.False(t, rs.Due, "a wait that timed out is not resumed again")

		ttl := func(key string) time.Duration {
			v, err := rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			return v
		}
		for _, key := range []string{rkeys.TaskChildren("late"), rkeys.TaskChildSpecs("late"), rkeys.TaskChildEnds("late")} {
			require.NoError(t, rdb.Expire(ctx, key, time.Minute).Err())
		}
		require.NoError(t, rdb.Expire(ctx, rkeys.Task("late"), time.Minute).Err())
		_, err = st.Cancel(ctx, "late", "")
		require.NoError(t, err)
		for _, key := range []string{rkeys.TaskChildren("late"), rkeys.TaskChildSpecs("late"), rkeys.TaskChildEnds("late")} {
			require.Greater(t, ttl(key), 10*time.Minute, "a cancel sets %s's lifetime with the record's", key)
		}
	})
}
