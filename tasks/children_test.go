package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestChildEnvelopes: child IDs are derived (id, name, position), a
// child gets parent, root, depth and the root's caps, the parent's
// tenant, queue, and at most its deadline; the caps and bad IDs are
// refused with ErrInvalidChildren.
func TestChildEnvelopes(t *testing.T) {
	t.Parallel()
	c := NewClient(nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	parent := &Envelope{ID: "P", Agent: "a", Queue: "q", Tenant: "acme", MaxTokens: 500, MaxCostUSD: 2,
		Deadline: now.Add(time.Hour).UnixMilli()}
	envs, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", ID: "given"}, {Agent: "x", Name: "sum", Deadline: "2h"},
		{Agent: "x", Tenant: "other", Queue: "q2", Deadline: "10m"}}, now)
	require.NoError(t, err)
	require.Equal(t, []string{"given", "P.sum", "P.3"}, []string{envs[0].ID, envs[1].ID, envs[2].ID})
	e := envs[1]
	require.Equal(t, "P", e.Parent)
	require.Equal(t, "P", e.Root)
	require.Equal(t, 1, e.Depth)
	require.Equal(t, int64(500), e.TreeMaxTokens)
	require.Equal(t, 2.0, e.TreeMaxCostUSD)
	require.Equal(t, "acme", e.Tenant)
	require.Equal(t, "q", e.Queue)
	require.Equal(t, parent.Deadline, e.Deadline, "at most the parent's")
	require.Equal(t, "other", envs[2].Tenant)
	require.Equal(t, "q2", envs[2].Queue)
	require.Equal(t, now.Add(10*time.Minute).UnixMilli(), envs[2].Deadline)

	grand, err := c.ChildEnvelopes(e, []string{"P"}, []ChildSpec{{Agent: "y"}}, now)
	require.NoError(t, err)
	require.Equal(t, "P.sum.1", grand[0].ID)
	require.Equal(t, "P", grand[0].Root)
	require.Equal(t, 2, grand[0].Depth)
	require.Equal(t, int64(500), grand[0].TreeMaxTokens, "the root's caps, down the tree")

	many := make([]ChildSpec, MaxChildren+1)
	for i := range many {
		many[i] = ChildSpec{Agent: "x"}
	}
	deep := *parent
	deep.Depth = MaxDepth
	for name, try := range map[string]func() error{
		"none":     func() error { _, err := c.ChildEnvelopes(parent, nil, nil, now); return err },
		"too many": func() error { _, err := c.ChildEnvelopes(parent, nil, many, now); return err },
		"too deep": func() error { _, err := c.ChildEnvelopes(&deep, nil, many[:1], now); return err },
		"own ID": func() error {
			_, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", ID: "P"}}, now)
			return err
		},
		"ancestor": func() error {
			_, err := c.ChildEnvelopes(e, []string{"P"}, []ChildSpec{{Agent: "x", ID: "P"}}, now)
			return err
		},
		"twice": func() error {
			_, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", ID: "d"}, {Agent: "x", ID: "d"}}, now)
			return err
		},
		"no agent": func() error { _, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{}}, now); return err },
		"bad ID": func() error {
			_, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", ID: "a#1"}}, now)
			return err
		},
		"past": func() error {
			_, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", Deadline: "2020-01-01T00:00:00Z"}}, now)
			return err
		},
		"bad state": func() error {
			_, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "x", Priority: "urgent"}}, now)
			return err
		},
	} {
		require.ErrorIs(t, try(), ErrInvalidChildren, name)
	}
}

// waitingParent enqueues parent id and makes it wait (what slice 2's
// suspend does): its run 1 scheduled an hour out, its children wait
// stored for run 1, the record waiting at run 1. It returns the parent's
// envelope.
func waitingParent(t *testing.T, c *Client, id, mode string, specs []ChildSpec) *Envelope {
	t.Helper()
	ctx := context.Background()
	_, err := c.Enqueue(ctx, Task{ID: id, Agent: "boss", MaxTokens: 100})
	require.NoError(t, err)
	env := &Envelope{ID: id, Agent: "boss", Queue: DefaultQueue, Run: 1, EnqueuedAt: time.Now().UTC(), MaxTokens: 100}
	require.NoError(t, c.EnqueueRun(ctx, env, time.Hour))
	_, err = c.PrepareChildren(ctx, env, 1, mode, specs)
	require.NoError(t, err)
	require.NoError(t, c.store.rdb.HSet(ctx, rkeys.Task(id), record.FieldState, "waiting", record.FieldRun, 1).Err())
	return env
}

// TestSpawnAndResume: SpawnChildren enqueues the children (parent set on
// their records, the parent's View lists them), a repeat enqueues nothing
// and is no error; each child's end is reported, and the last one makes
// the parent's scheduled run pending (ResumeRun), once.
func TestSpawnAndResume(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := NewClient(rdb)
	specs := []ChildSpec{{Agent: "w"}, {Agent: "w", Name: "b"}}
	parent := waitingParent(t, c, "P", record.ModeAll, specs)
	ids, err := c.SpawnChildren(ctx, parent, specs)
	require.NoError(t, err)
	require.Equal(t, []string{"P.1", "P.b"}, ids)
	again, err := c.SpawnChildren(ctx, parent, specs)
	require.NoError(t, err)
	require.Equal(t, ids, again, "idempotent")
	kid, err := c.Store().Get(ctx, "P.1")
	require.NoError(t, err)
	require.Equal(t, "P", kid.Parent)
	require.Equal(t, "P", kid.Root)
	pv, err := c.Store().Get(ctx, "P")
	require.NoError(t, err)
	require.Equal(t, ids, pv.Children)

	inScheduled := func() bool {
		_, err := rdb.ZScore(ctx, broker.ScheduledKey(DefaultQueue), "P#1").Result()
		return err == nil
	}
	require.NoError(t, c.ReportChildEnd(ctx, "P", ChildEnd{ID: "P.1", State: StateSucceeded, Result: json.RawMessage(`1`)}))
	require.True(t, inScheduled(), "one child still runs")
	res, err := c.Cancel(ctx, "P.b", "enough")
	require.NoError(t, err)
	require.Zero(t, res.Children)
	require.False(t, inScheduled(), "the canceled child was the last: the parent's run is pending")
	ok, err := c.ResumeRun(ctx, "P", DefaultQueue, 1)
	require.NoError(t, err)
	require.False(t, ok, "resumed once")
	ends, err := c.Store().rec.ChildEnds(ctx, "P")
	require.NoError(t, err)
	require.Equal(t, StateSucceeded, ends[0].State)
	require.Equal(t, StateCanceled, ends[1].State)
	require.Equal(t, "canceled: enough", ends[1].Error)
}

// TestCancelCascade: canceling a parent cancels its unended children and
// theirs; a child that ended stays as it was.
func TestCancelCascade(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := NewClient(rdb)
	specs := []ChildSpec{{Agent: "w"}, {Agent: "w"}, {Agent: "w"}}
	parent := waitingParent(t, c, "R", record.ModeAll, specs)
	_, err := c.SpawnChildren(ctx, parent, specs)
	require.NoError(t, err)
	// R.1 waits for a child of its own; R.3 has ended.
	child := waitingParentOf(t, c, "R.1", parent)
	_, err = c.SpawnChildren(ctx, child, []ChildSpec{{Agent: "w"}})
	require.NoError(t, err)
	_, err = c.Cancel(ctx, "R.3", "")
	require.NoError(t, err)

	res, err := c.Cancel(ctx, "R", "stop")
	require.NoError(t, err)
	require.Equal(t, 3, res.Children, "R.1, R.1.1, R.2")
	for _, id := range []string{"R.1", "R.1.1", "R.2", "R.3"} {
		v, err := c.Store().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateCanceled, v.State, id)
	}
	v, err := c.Store().Get(ctx, "R.2")
	require.NoError(t, err)
	require.Equal(t, "parent R canceled: stop", v.CancelReason)
}

// waitingParentOf makes the existing child id wait for children of its
// own, as waitingParent does, and returns its envelope.
func waitingParentOf(t *testing.T, c *Client, id string, parent *Envelope) *Envelope {
	t.Helper()
	ctx := context.Background()
	envs, err := c.ChildEnvelopes(parent, nil, []ChildSpec{{Agent: "w", ID: id}}, time.Now())
	require.NoError(t, err)
	env := envs[0]
	env.Run = 1
	require.NoError(t, c.EnqueueRun(ctx, env, time.Hour))
	kids, err := c.ChildEnvelopes(env, []string{parent.ID}, []ChildSpec{{Agent: "w"}}, time.Now())
	require.NoError(t, err)
	b, _ := json.Marshal(kids[0])
	_, err = c.store.rec.SetChildren(ctx, id, record.Children{Run: 1, Mode: record.ModeAll, Kids: []record.Child{{ID: kids[0].ID, Spec: b}}})
	require.NoError(t, err, fmt.Sprint(id))
	require.NoError(t, c.store.rdb.HSet(ctx, rkeys.Task(id), record.FieldState, "waiting", record.FieldRun, 1).Err())
	return env
}

// TestAnyCancelsTheOthers: in mode any the first success resumes the
// parent, and the children that have not ended are canceled.
func TestAnyCancelsTheOthers(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := NewClient(rdb)
	specs := []ChildSpec{{Agent: "w"}, {Agent: "w"}, {Agent: "w"}}
	parent := waitingParent(t, c, "A", record.ModeAny, specs)
	_, err := c.SpawnChildren(ctx, parent, specs)
	require.NoError(t, err)
	require.NoError(t, c.ReportChildEnd(ctx, "A", ChildEnd{ID: "A.2", State: StateSucceeded}))
	_, err = rdb.ZScore(ctx, broker.ScheduledKey(DefaultQueue), "A#1").Result()
	require.Error(t, err, "resumed")
	for _, id := range []string{"A.1", "A.3"} {
		v, err := c.Store().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateCanceled, v.State, id)
	}
	ends, err := c.Store().rec.ChildEnds(ctx, "A")
	require.NoError(t, err)
	require.Equal(t, []State{StateCanceled, StateSucceeded, StateCanceled}, []State{ends[0].State, ends[1].State, ends[2].State})
}
