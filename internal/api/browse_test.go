package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/tasks"
)

// TestListTasks: GET /api/v1/tasks pages through a queue's pending tasks
// with its cursor, filters by agent, state and correlation ID, and refuses
// a bad state, limit or cursor (400).
func TestListTasks(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	batch := make([]tasks.Task, 0, 120)
	for i := range 120 {
		batch = append(batch, tasks.Task{ID: fmt.Sprintf("l%03d", i), Agent: []string{"tool", "llm"}[i%2],
			CorrelationID: fmt.Sprintf("order-%d", i%3)})
	}
	_, err := tasks.NewClient(e.rdb).EnqueueMany(ctx, batch)
	require.NoError(t, err)

	list := func(q url.Values) inspect.TaskPage {
		t.Helper()
		r := do(t, "GET", e.url+"/api/v1/tasks?"+q.Encode(), "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		var p inspect.TaskPage
		require.NoError(t, json.Unmarshal([]byte(r.body), &p))
		require.NotContains(t, r.body, `"history"`)
		return p
	}
	seen := map[string]bool{}
	q := url.Values{"queue": {"default"}, "state": {"pending"}, "agent": {"llm"}, "limit": {"25"}}
	for {
		p := list(q)
		for _, tk := range p.Tasks {
			require.False(t, seen[tk.ID], tk.ID)
			require.Equal(t, "llm", tk.Agent)
			require.Equal(t, tasks.StatePending, tk.ListedAs)
			seen[tk.ID] = true
		}
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	require.Len(t, seen, 60)

	p := list(url.Values{"correlation_id": {"order-1"}, "limit": {"1000"}})
	require.Len(t, p.Tasks, 40)
	require.Empty(t, p.NextCursor)

	requireError(t, do(t, "GET", e.url+"/api/v1/tasks?state=succeeded", "", ""), 400, api.CodeInvalidRequest, "succeeded")
	requireError(t, do(t, "GET", e.url+"/api/v1/tasks?limit=0", "", ""), 400, api.CodeInvalidRequest, "limit")
	requireError(t, do(t, "GET", e.url+"/api/v1/tasks?cursor=zzz", "", ""), 400, api.CodeInvalidRequest, "cursor")
}

// TestPauseResumeRoutes: POST /api/v1/queues/{name}/pause and /resume
// pause and resume a queue (changed says whether they did anything); an
// unknown queue is 404.
func TestPauseResumeRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	r := do(t, "POST", e.url+"/api/v1/queues/default/pause", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, map[string]any{"queue": "default", "paused": true, "changed": true}, r.json)
	qs, err := inspect.Queues(e.rdb)
	require.NoError(t, err)
	require.Empty(t, qs, "a configured queue with no task yet is paused ahead")
	require.EqualValues(t, 1, e.rdb.Exists(context.Background(), "asynq:{default}:paused").Val())
	r = do(t, "POST", e.url+"/api/v1/queues/default/pause", "", "")
	require.Equal(t, false, r.json["changed"])
	r = do(t, "POST", e.url+"/api/v1/queues/default/resume", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, map[string]any{"queue": "default", "paused": false, "changed": true}, r.json)
	requireError(t, do(t, "POST", e.url+"/api/v1/queues/nope/pause", "", ""), 404, api.CodeNotFound, "nope")
}

// TestEnqueueAfterQueueSetLost: with asynq's set of queues lost under a
// running API (a FLUSHALL, a restart without persistence, a failover to a
// replica that missed the write), the waiting tasks drop out of the task
// list; the next enqueue puts the queue back and the list is whole again.
func TestEnqueueAfterQueueSetLost(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	listed := func() []string {
		t.Helper()
		r := do(t, "GET", e.url+"/api/v1/tasks?state=pending", "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		var p inspect.TaskPage
		require.NoError(t, json.Unmarshal([]byte(r.body), &p))
		var ids []string
		for _, tk := range p.Tasks {
			ids = append(ids, tk.ID)
		}
		return ids
	}
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"before","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.Equal(t, []string{"before"}, listed())
	require.NoError(t, e.rdb.Del(ctx, "asynq:queues").Err())
	require.Empty(t, listed(), "asynq's views need the set")
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"after","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.ElementsMatch(t, []string{"after", "before"}, listed(), "the enqueue registered the queue again")
}
