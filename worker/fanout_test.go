package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// fanoutYAML runs a boss and its kids; concurrency 1 (a waiting boss
// holds no slot: its kids run meanwhile, one at a time).
const fanoutYAML = `
worker: {concurrency: 1, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
agents:
  boss: {}
  kid: {}
`

// kids are n child specs of agent kid named k1…kn, params {"i": i}.
func kids(n int, action string) []agent.Child {
	out := make([]agent.Child, n)
	for i := range out {
		out[i] = agent.Child{Agent: "kid", Action: action, Name: fmt.Sprintf("k%d", i+1), Params: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i+1))}
	}
	return out
}

// bossAgent suspends with the wait of its run's resume count (waits[r])
// while there is one, and then succeeds, sending each resumed request on
// got.
func bossAgent(got chan<- agent.Request, waits ...agent.Wait) agent.Runner {
	return agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		if req.Resume > 0 {
			got <- req
		}
		if req.Resume < len(waits) {
			return nil, agent.Suspend(waits[req.Resume])
		}
		return json.RawMessage(`"done"`), nil
	})
}

// echoKid succeeds with its params, counting its calls per task.
func echoKid(calls *sync.Map) agent.Runner {
	return agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		n, _ := calls.LoadOrStore(req.TaskID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		return req.Params, nil
	})
}

func resumedBy(v *tasks.View) []string {
	var by []string
	for _, ev := range v.History {
		if ev.Event == tasks.EventResumed {
			by = append(by, ev.By)
		}
	}
	return by
}

func nextRequest(t *testing.T, got <-chan agent.Request) agent.Request {
	t.Helper()
	select {
	case req := <-got:
		return req
	case <-time.After(30 * time.Second):
		t.Fatal("the parent never resumed")
	}
	return agent.Request{}
}

// TestFanOutAll (#37 §3): a parent (a Go agent) suspends with 5 children,
// mode all: it waits holding no slot (concurrency 1: the children run),
// and resumes once, by "children", with the 5 results in spawn order; a
// child spec the children check refuses (the parent's own ID) fails the
// attempt logic_error "invalid suspend: ".
func TestFanOutAll(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 4)
	var calls sync.Map
	bad := agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		return nil, agent.Suspend(agent.Wait{Children: []agent.Child{{Agent: "kid", ID: req.TaskID}}})
	})
	_, rdb := runWorker(t, fanoutYAML, WithAgent("boss", bossAgent(got, agent.Wait{Children: kids(5, ""), Timeout: time.Hour})),
		WithAgent("kid", echoKid(&calls)), WithAgent("bad", bad))
	c := tasks.NewClient(rdb)
	ctx := context.Background()
	_, err := c.Enqueue(ctx, tasks.Task{ID: "F", Agent: "boss"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, tasks.Task{ID: "B", Agent: "bad"})
	require.NoError(t, err)

	req := nextRequest(t, got)
	require.Equal(t, 1, req.Resume)
	require.Equal(t, &agent.WaitResult{Kind: agent.WaitChildren}, req.Wait)
	require.Len(t, req.Children, 5)
	for i, ch := range req.Children {
		require.Equal(t, fmt.Sprintf("F.k%d", i+1), ch.ID)
		require.Equal(t, fmt.Sprintf("k%d", i+1), ch.Name)
		require.Equal(t, string(tasks.StateSucceeded), ch.State)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i+1), string(ch.Result))
	}
	views := waitTerminal(t, rdb, []string{"F", "B"}, 20*time.Second)
	v := views["F"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, []string{record.WaitChildren}, resumedBy(v), "resumed once, by its children")
	require.Equal(t, 1, v.Resumes)
	for i := 1; i <= 5; i++ {
		n, ok := calls.Load(fmt.Sprintf("F.k%d", i))
		require.True(t, ok)
		require.EqualValues(t, 1, n.(*atomic.Int32).Load())
	}
	require.Equal(t, tasks.StateDeadLettered, views["B"].State)
	require.Equal(t, "logic_error", views["B"].ErrorClass)
	require.Contains(t, views["B"].Error, "invalid suspend: ")
	_, err = tasks.NewStore(rdb).Get(ctx, "B.1")
	require.ErrorIs(t, err, tasks.ErrNotFound, "a refused wait makes no child")
}

// TestFanOutAny: mode any resumes the parent at the first child's
// success; the children still running end canceled.
func TestFanOutAny(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 4)
	kid := agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		if req.Action == "fast" {
			return json.RawMessage(`"first"`), nil
		}
		<-ctx.Done() // the slow ones run until canceled
		return nil, ctx.Err()
	})
	children := []agent.Child{{Agent: "kid", Action: "slow", Name: "s1"}, {Agent: "kid", Action: "slow", Name: "s2"}, {Agent: "kid", Action: "fast", Name: "f"}}
	_, rdb := runWorker(t, `
worker: {concurrency: 4, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
agents:
  boss: {}
  kid: {}
`, WithAgent("boss", bossAgent(got, agent.Wait{Children: children, Mode: "any"})), WithAgent("kid", kid))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "A", Agent: "boss"})
	require.NoError(t, err)

	req := nextRequest(t, got)
	require.Len(t, req.Children, 3)
	require.Equal(t, "A.f", req.Children[2].ID)
	require.Equal(t, string(tasks.StateSucceeded), req.Children[2].State)
	require.JSONEq(t, `"first"`, string(req.Children[2].Result))
	for _, id := range []string{"A.s1", "A.s2"} {
		v := waitState(t, rdb, id, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
		require.Equal(t, tasks.StateCanceled, v.State, id)
	}
	v := waitState(t, rdb, "A", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, []string{record.WaitChildren}, resumedBy(v))
}

// TestFanOutAgain: a resumed parent that suspends again with the same
// children (their IDs derived from the parent and their names) enqueues
// none of them twice: they have ended, so the second wait resumes at
// once with their ends; every child ran once.
func TestFanOutAgain(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 4)
	var calls sync.Map
	w := agent.Wait{Children: kids(3, "")}
	_, rdb := runWorker(t, fanoutYAML, WithAgent("boss", bossAgent(got, w, w)), WithAgent("kid", echoKid(&calls)))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "R", Agent: "boss"})
	require.NoError(t, err)

	first, second := nextRequest(t, got), nextRequest(t, got)
	require.Equal(t, 2, second.Resume)
	require.Equal(t, first.Children, second.Children, "the same children, ended once")
	v := waitState(t, rdb, "R", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, []string{record.WaitChildren, record.WaitChildren}, resumedBy(v))
	n := 0
	calls.Range(func(_, c any) bool {
		require.EqualValues(t, 1, c.(*atomic.Int32).Load())
		n++
		return true
	})
	require.Equal(t, 3, n)
}

// TestFanOutTreeBudget: a parent with max_tokens 1000 whose 3 children
// use 600 tokens each (one at a time: concurrency 1): the tree's usage
// passes the cap at the second, so the third is dead-lettered
// budget_exhausted before its call, and the parent's resumed attempt too.
func TestFanOutTreeBudget(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 4)
	var kidCalls atomic.Int32
	kid := agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		kidCalls.Add(1)
		return json.RawMessage(`{"usage":{"prompt_tokens":600,"completion_tokens":0,"total_tokens":600}}`), nil
	})
	_, rdb := runWorker(t, fanoutYAML, WithAgent("boss", bossAgent(got, agent.Wait{Children: kids(3, "")})), WithAgent("kid", kid))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "T", Agent: "boss", MaxTokens: 1000})
	require.NoError(t, err)

	views := waitTerminal(t, rdb, []string{"T.k1", "T.k2", "T.k3"}, 30*time.Second)
	states := map[tasks.State]int{}
	for id, v := range views {
		states[v.State]++
		if v.State == tasks.StateDeadLettered {
			require.Equal(t, ReasonBudgetExhausted, v.Reason, id)
		}
	}
	require.Equal(t, map[tasks.State]int{tasks.StateSucceeded: 2, tasks.StateDeadLettered: 1}, states)
	require.EqualValues(t, 2, kidCalls.Load(), "the over-cap child's call was not made")
	v := waitState(t, rdb, "T", 30*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.Equal(t, ReasonBudgetExhausted, v.Reason)
}

// TestFanOutTimeout: a children wait whose timeout passes before its
// child ends resumes by "timeout": the request's wait is timed out and
// the child, still running, has its state then.
func TestFanOutTimeout(t *testing.T) {
	t.Parallel()
	got := make(chan agent.Request, 4)
	kid := agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
agents:
  boss: {}
  kid: {}
`, WithAgent("boss", bossAgent(got, agent.Wait{Children: kids(1, ""), Timeout: time.Second})), WithAgent("kid", kid))
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(context.Background(), tasks.Task{ID: "O", Agent: "boss"})
	require.NoError(t, err)

	req := nextRequest(t, got)
	require.Equal(t, &agent.WaitResult{Kind: agent.WaitChildren, TimedOut: true}, req.Wait)
	require.Len(t, req.Children, 1)
	require.False(t, tasks.State(req.Children[0].State).Terminal(), req.Children[0].State)
	v := waitState(t, rdb, "O", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, []string{record.WaitTimeout}, resumedBy(v))
	_, err = c.Cancel(context.Background(), "O.k1", "test over")
	require.NoError(t, err)
}
