package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// spawn makes parent wait for children specs, as a worker's children
// wait does (tasks.Client.PrepareChildren, then SpawnChildren), and
// returns the children's IDs.
func spawn(t *testing.T, f *fixture, parent *tasks.Envelope, specs []tasks.ChildSpec) []string {
	t.Helper()
	ctx := context.Background()
	_, err := f.client.PrepareChildren(ctx, parent, 1, record.ModeAll, specs)
	require.NoError(t, err)
	ids, err := f.client.SpawnChildren(ctx, parent, specs)
	require.NoError(t, err)
	return ids
}

// TestTaskPageRunTree (#37): a child's page links its parent (and its
// root when that is another task), and a task of a tree shows the run
// tree from its root: each task a link to its page, indented by depth,
// with its state and its tokens and cost, the page's task highlighted; a
// task of no tree shows none.
func TestTaskPageRunTree(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: "top", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	_, err = f.client.Enqueue(ctx, tasks.Task{ID: "alone", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	top := &tasks.Envelope{ID: "top", Agent: "tool", Queue: tasks.DefaultQueue}
	ids := spawn(t, f, top, []tasks.ChildSpec{{Agent: "tool"}, {Agent: "llm", Name: "b<x>"}, {Agent: "llm"}})
	require.Equal(t, []string{"top.1", "top.b<x>", "top.3"}, ids)
	mid := &tasks.Envelope{ID: "top.1", Agent: "tool", Queue: tasks.DefaultQueue, Parent: "top", Root: "top", Depth: 1}
	require.Equal(t, []string{"top.1.1"}, spawn(t, f, mid, []tasks.ChildSpec{{Agent: "tool"}}))
	_, err = f.client.Cancel(ctx, "top.b<x>", "")
	require.NoError(t, err)
	seed := record.Seed{Agent: "llm", Action: "run", Queue: tasks.DefaultQueue, EnqueuedAt: time.Now()}
	_, err = record.NewStore(f.rdb).Apply(ctx, record.Delivery{ID: "top.3", Attempt: 1, Seed: seed}, record.Succeeded(record.Attempt{Attempt: 1, Agent: "llm",
		Usage: usage.Usage{Model: "m", InputTokens: 2006, OutputTokens: 300, TotalTokens: 2306, CostUSD: 0.005615, Priced: true}}, nil))
	require.NoError(t, err)

	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/top.1.1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-parent"><a href="/ui/tasks/top.1">top.1</a></dd>`)
	require.Contains(t, r.body, `<dd id="task-root"><a href="/ui/tasks/top">top</a></dd>`)
	require.Contains(t, r.body, `<h2>Run tree</h2>`)
	rows := treeRows(r.body)
	require.Equal(t, []string{"top", "top.1", "top.1.1", "top.b&lt;x&gt;", "top.3"}, treeIDs(rows))
	require.Contains(t, rows[0], `<td class="node d-0"><a href="/ui/tasks/top">top</a></td><td><span class="badge st-scheduled">scheduled</span></td><td>tool</td><td class="n">–</td><td class="n">–</td>`)
	require.Contains(t, rows[1], `<td class="node d-1"><a href="/ui/tasks/top.1">top.1</a></td><td><span class="badge st-pending">pending</span></td>`)
	require.Contains(t, rows[2], `class="current"`)
	require.Contains(t, rows[2], `<td class="node d-2"><a href="/ui/tasks/top.1.1" aria-current="page">top.1.1</a></td>`)
	require.Contains(t, rows[3], `<a href="/ui/tasks/top.b%3Cx%3E">top.b&lt;x&gt;</a></td><td><span class="badge st-canceled">canceled</span></td><td>llm</td>`)
	require.Contains(t, rows[4], `<td><span class="badge st-succeeded">succeeded</span></td><td>llm</td><td class="n">2306</td><td class="n">$0.005615</td>`)
	require.Equal(t, 1, strings.Count(r.body, `class="current"`))
	require.NotContains(t, r.body, `tree-more`)

	r = call(t, "GET", f.url+"/ui/tasks/top.1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-parent"><a href="/ui/tasks/top">top</a></dd>`)
	require.NotContains(t, r.body, `task-root`, "its root is its parent")
	require.Contains(t, r.body, `<dd id="task-children">1 (of its last children wait)</dd>`)
	require.Contains(t, treeRows(r.body)[1], `class="current"`)

	r = call(t, "GET", f.url+"/ui/tasks/top", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.NotContains(t, r.body, `task-parent`)
	require.Len(t, treeRows(r.body), 5)
	require.Contains(t, treeRows(r.body)[0], `class="current"`)

	r = call(t, "GET", f.url+"/ui/tasks/alone", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.NotContains(t, r.body, `Run tree`)
	require.NotContains(t, r.body, `task-parent`)
}

// TestTaskPageRunTreeCap: a fan-out wider than the page's cap shows the
// first treeRowCap tasks and how many more there are; a child past the
// cap is shown after them, highlighted, with how many were left out
// before it.
func TestTaskPageRunTreeCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: "fan", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)
	const n = treeRowCap + 50
	specs := make([]tasks.ChildSpec, n)
	for i := range specs {
		specs[i] = tasks.ChildSpec{Agent: "tool"}
	}
	spawn(t, f, &tasks.Envelope{ID: "fan", Agent: "tool", Queue: tasks.DefaultQueue}, specs)

	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/fan", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	ids := treeIDs(treeRows(r.body))
	require.Len(t, ids, treeRowCap)
	require.Equal(t, "fan", ids[0])
	require.Equal(t, fmt.Sprintf("fan.%d", treeRowCap-1), ids[treeRowCap-1])
	require.Contains(t, r.body, fmt.Sprintf(`<p class="note" id="tree-more">… %d more</p>`, n+1-treeRowCap))

	// fan.230 is row 231 of 251: rows 201…230 are left out before it, 20 after.
	r = call(t, "GET", f.url+"/ui/tasks/fan.230", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	rows := treeRows(r.body)
	require.Len(t, rows, treeRowCap+1)
	require.Contains(t, rows[treeRowCap], `class="current"`)
	require.Contains(t, rows[treeRowCap], `>fan.230</a>`)
	require.Contains(t, r.body, `<tr class="gap"><td colspan="5">… 30 more</td></tr>`)
	require.Contains(t, r.body, `<p class="note" id="tree-more">… 20 more</p>`)
}

// treeRows are the task rows of a page's run tree (the gap rows left out).
func treeRows(body string) []string {
	var rows []string
	for _, part := range strings.Split(body, `<tr data-id="`)[1:] {
		rows = append(rows, part[:strings.Index(part, "</tr>")])
	}
	return rows
}

// treeIDs are the task IDs of rows (as the page escapes them).
func treeIDs(rows []string) []string {
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row[:strings.Index(row, `"`)]
	}
	return ids
}
