package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueueTraceparentHeader: an API that does not trace (no provider:
// the global no-op) carries the request's W3C traceparent and tracestate
// into each task's envelope as they came; a malformed one is ignored, and
// a request without one leaves the envelope untraced.
func TestEnqueueTraceparentHeader(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: token})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post := func(body string, header map[string]string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+"/api/v1/tasks", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	post(`{"id":"tp-one","agent":"tool"}`, map[string]string{"traceparent": tp, "tracestate": "k=v"})
	post(`{"tasks":[{"id":"tp-b1","agent":"tool"},{"id":"tp-b2","agent":"tool"}]}`, map[string]string{"traceparent": tp})
	post(`{"id":"tp-bad","agent":"tool"}`, map[string]string{"traceparent": "00-nonsense"})
	post(`{"id":"tp-none","agent":"tool"}`, nil)

	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	envelope := func(id string) *tasks.Envelope {
		t.Helper()
		info, err := insp.GetTaskInfo(tasks.DefaultQueue, id)
		require.NoError(t, err)
		env, err := tasks.Decode(info.Payload)
		require.NoError(t, err)
		return env
	}
	one := envelope("tp-one")
	require.Equal(t, tp, one.Traceparent)
	require.Equal(t, "k=v", one.Tracestate)
	for _, id := range []string{"tp-b1", "tp-b2"} {
		require.Equal(t, tp, envelope(id).Traceparent, id)
	}
	for _, id := range []string{"tp-bad", "tp-none"} {
		require.Empty(t, envelope(id).Traceparent, id)
	}
}
