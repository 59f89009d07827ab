package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// TestCancelTask: POST /api/v1/tasks/{id}/cancel cancels a waiting task
// (200, taken off its queue, reason in its history), refuses an ended one
// (409 task_ended naming its state) and an unknown one (404 not_found),
// and a bad body (400).
func TestCancelTask(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: token})
	ctx := context.Background()
	r := do(t, "POST", e.url+"/api/v1/tasks", token, `{"id":"c1","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", token, `{"id":"c2","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)

	r = do(t, "POST", e.url+"/api/v1/tasks/c1/cancel", "", `{"reason":"x"}`)
	requireError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)

	r = do(t, "POST", e.url+"/api/v1/tasks/c1/cancel", token, `{"reason":"user left"}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "c1", r.json["id"])
	require.Equal(t, "canceled", r.json["state"])
	require.Equal(t, "pending", r.json["previous_state"])
	require.Equal(t, true, r.json["removed"])
	_, err := asynq.NewInspectorFromRedisClient(e.rdb).GetTaskInfo(tasks.DefaultQueue, "c1")
	require.ErrorIs(t, err, asynq.ErrTaskNotFound)

	r = do(t, "GET", e.url+"/api/v1/tasks/c1", token, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "canceled", r.json["state"])
	require.Equal(t, "user left", r.json["cancel_reason"])
	h := r.json["history"].([]any)
	last := h[len(h)-1].(map[string]any)
	require.Equal(t, tasks.EventTaskCanceled, last["event"])
	require.Equal(t, "user left", last["reason"])

	// No body at all is fine; the reply still has every documented field.
	r = do(t, "POST", e.url+"/api/v1/tasks/c2/cancel", token, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	for _, k := range []string{"id", "state", "previous_state", "removed", "stopping", "reason"} {
		require.Contains(t, r.json, k)
	}
	require.Equal(t, "", r.json["reason"])

	r = do(t, "POST", e.url+"/api/v1/tasks/c1/cancel", token, `{}`)
	requireError(t, r, http.StatusConflict, api.CodeTaskEnded, "canceled")
	require.Equal(t, "canceled", r.json["state"])

	_, err = record.StoreOf(e.store).Create(ctx, record.New{ID: "done", Seed: record.Seed{Agent: "tool"}, State: tasks.StateSucceeded})
	require.NoError(t, err)
	r = do(t, "POST", e.url+"/api/v1/tasks/done/cancel", token, "")
	requireError(t, r, http.StatusConflict, api.CodeTaskEnded, "succeeded")
	require.Equal(t, "succeeded", r.json["state"])

	r = do(t, "POST", e.url+"/api/v1/tasks/nope/cancel", token, "")
	requireError(t, r, http.StatusNotFound, api.CodeNotFound, `"nope"`)

	r = do(t, "POST", e.url+"/api/v1/tasks/nope/cancel", token, `{"why":"x"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, "why")
	r = do(t, "POST", e.url+"/api/v1/tasks/nope/cancel", token, `{"reason":`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest)
	r = do(t, "POST", e.url+"/api/v1/tasks/nope/cancel", token, `{"reason":"`+strings.Repeat("r", tasks.MaxCancelReason+1)+`"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `cancel request: field "reason" is 1001 bytes`)
	r = do(t, "POST", e.url+"/api/v1/tasks/nope/cancel", token, `{"reason":"x"} {"reason":"y"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, "after the JSON value")

	r = do(t, "GET", e.url+"/api/v1/tasks/c1/cancel", token, "")
	requireError(t, r, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
}
