package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// TestSignalTask: POST /api/v1/tasks/{id}/signals/{name} keeps a signal
// sent to a task that does not wait for it (resumed false), resumes a
// task waiting for it (its scheduled run made pending), answers a
// duplicate, and refuses an unknown task (404), an ended one (409
// task_ended), a bad name or body (400 invalid_signal) and too much data
// (413 request_too_large).
func TestSignalTask(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: token})
	ctx := context.Background()
	r := do(t, "POST", e.url+"/api/v1/tasks", token, `{"id":"s1","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)

	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/early", token, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, map[string]any{"id": "s1", "name": "early", "state": "pending", "resumed": false, "duplicate": false}, r.json)

	// s1 suspends for "approve": the record waits, its run 1 is scheduled.
	rec := record.StoreOf(e.store)
	w := record.Wait{JSON: json.RawMessage(`{"kind":"signal","signal":"approve","due":"2030-01-01T00:00:00Z"}`), Signal: "approve", Resumes: 1}
	out, err := rec.Apply(ctx, record.Delivery{ID: "s1", Attempt: 1, Seed: record.Seed{Agent: "tool", Queue: "default"}},
		record.Waiting(record.Attempt{Attempt: 1}, record.NextRun{Run: 1}, w, time.Hour))
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
	next := &tasks.Envelope{ID: "s1", Agent: "tool", Run: 1, Resumes: 1, EnqueuedAt: time.Now()}
	require.NoError(t, tasks.NewClient(e.rdb).EnqueueRun(ctx, next, time.Hour))
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	info, err := insp.GetTaskInfo(tasks.DefaultQueue, "s1#1")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateScheduled, info.State)
	r = do(t, "GET", e.url+"/api/v1/tasks?state=waiting", token, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `"s1"`, "a waiting task is listed by its state (its run in the scheduled set)")

	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/approve", token, `{"ok":true}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, map[string]any{"id": "s1", "name": "approve", "state": "waiting", "resumed": true, "duplicate": false}, r.json)
	info, err = insp.GetTaskInfo(tasks.DefaultQueue, "s1#1")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State, "resumed: its run is due now")
	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/approve", token, `{"ok":false}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, true, r.json["duplicate"])

	r = do(t, "GET", e.url+"/api/v1/tasks/s1", token, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, float64(2), r.json["signals"])
	require.Equal(t, float64(1), r.json["resumes"])
	require.Equal(t, "signal", r.json["wait"].(map[string]any)["kind"])

	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/approve", "", `1`)
	requireError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	r = do(t, "POST", e.url+"/api/v1/tasks/nope/signals/a", token, "")
	requireError(t, r, http.StatusNotFound, api.CodeNotFound)
	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/a%20b", token, "")
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidSignal)
	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/a", token, `{"x":`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidSignal)
	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/a", token, `"`+strings.Repeat("x", tasks.MaxSignalBytes)+`"`)
	requireError(t, r, http.StatusRequestEntityTooLarge, api.CodeRequestTooLarge)

	_, err = tasks.NewClient(e.rdb).Cancel(ctx, "s1", "")
	require.NoError(t, err)
	r = do(t, "POST", e.url+"/api/v1/tasks/s1/signals/late", token, "")
	requireError(t, r, http.StatusConflict, api.CodeTaskEnded, "signaled")
	require.Equal(t, "canceled", r.json["state"])
}
