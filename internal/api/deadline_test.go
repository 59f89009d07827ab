package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestEnqueueDeadline: POST /api/v1/tasks takes "deadline" (a duration
// from the enqueue or an RFC 3339 time), shows it in the task JSON and
// puts the task in the deadline index; a bad, past or impossible one is
// 400 invalid_request naming the field, single or in a batch, with
// nothing enqueued.
func TestEnqueueDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"d1","agent":"tool","deadline":"30s"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"d2","agent":"tool","deadline":"`+at.Format(time.RFC3339)+`"}]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)

	r = do(t, "GET", e.url+"/api/v1/tasks/d1", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	dl, err := time.Parse(time.RFC3339Nano, r.json["deadline"].(string))
	require.NoError(t, err, r.body)
	require.WithinDuration(t, time.Now().Add(30*time.Second), dl, 10*time.Second)
	r = do(t, "GET", e.url+"/api/v1/tasks/d2", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	dl, err = time.Parse(time.RFC3339Nano, r.json["deadline"].(string))
	require.NoError(t, err, r.body)
	require.True(t, at.Equal(dl), r.body)
	for _, id := range []string{"d1", "d2"} {
		_, err := e.rdb.ZScore(ctx, rkeys.Deadlines(), id).Result()
		require.NoError(t, err, "%s is in the deadline index", id)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"id":"b1","agent":"tool","deadline":"soon"}`, "neither a Go duration"},
		{`{"id":"b2","agent":"tool","deadline":"-5s"}`, "already past"},
		{`{"id":"b3","agent":"tool","deadline":"2001-01-01T00:00:00Z"}`, "already past"},
		{`{"id":"b4","agent":"tool","deadline":"1m","in":"1h"}`, "first run"},
		{`{"tasks":[{"id":"b5","agent":"tool"},{"id":"b6","agent":"tool","deadline":"0s"}]}`, "tasks[1]"},
	} {
		r := do(t, "POST", e.url+"/api/v1/tasks", "", tc.body)
		requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `field "deadline"`, tc.want)
	}
	for _, id := range []string{"b1", "b2", "b3", "b4", "b5", "b6"} {
		ok, err := e.store.Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, "%s has no record", id)
	}
}
