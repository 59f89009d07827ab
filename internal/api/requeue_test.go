package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/tasks"
)

// TestRequeueConcurrentAndStale (#23 item 9): 20 parallel requeues of one
// dead letter through the API: exactly one 200; every other one is 404
// not_found or 409 conflict; one "requeued" event; the task queued once.
// A requeue whose body names a run the dead letter is not at is 409
// conflict and requeues nothing; a bad run is 400.
func TestRequeueConcurrentAndStale(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	dlq := deadletter.NewStore(e.rdb)
	put := func(id string, run int) {
		_, err := dlq.Put(ctx, &deadletter.Entry{ID: id, Agent: "tool", ErrorClass: "logic_error", Error: "boom",
			Reason: deadletter.ReasonNotRetryable, Attempts: 1, Queue: "default", Run: run, DeadLetteredAt: time.Now()})
		require.NoError(t, err)
	}
	put("rq", 0)

	const n = 20
	replies := make([]*http.Response, n)
	codes := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, err := http.NewRequest("POST", e.url+"/api/v1/deadletters/rq/requeue", nil)
			if err != nil {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var body struct{ Code string }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			replies[i], codes[i] = resp, body.Code
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	statuses := make([]int, n)
	for i, resp := range replies {
		require.NotNil(t, resp, "request %d failed", i)
		statuses[i] = resp.StatusCode
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusNotFound, http.StatusConflict:
			require.Contains(t, []string{api.CodeNotFound, api.CodeConflict}, codes[i])
		default:
			t.Fatalf("request %d: status %d code %s", i, resp.StatusCode, codes[i])
		}
	}
	require.Equal(t, 1, ok, "exactly one requeue answers 200: %v", statuses)
	v, err := e.store.Get(ctx, "rq")
	require.NoError(t, err)
	events := 0
	for _, ev := range v.History {
		if ev.Event == tasks.EventRequeued {
			events++
		}
	}
	require.Equal(t, 1, events)
	pending, err := e.rdb.LRange(ctx, "asynq:{default}:pending", 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"rq#1"}, pending)

	// The task died again (run 1); a late requeue of the page that showed
	// run 0 is refused.
	put("rq", 1)
	r := do(t, "POST", e.url+"/api/v1/deadletters/rq/requeue", "", `{"run":0}`)
	requireError(t, r, http.StatusConflict, api.CodeConflict, "run 1, not run 0", "nothing was requeued")
	_, err = dlq.Get(ctx, "rq")
	require.NoError(t, err, "the newer dead letter stays")
	r = do(t, "POST", e.url+"/api/v1/deadletters/rq/requeue", "", `{"run":-1}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `"run"`)
	r = do(t, "POST", e.url+"/api/v1/deadletters/rq/requeue", "", `{"run":"1"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `"run"`)
	r = do(t, "POST", e.url+"/api/v1/deadletters/rq/requeue", "", `{"run":1}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.EqualValues(t, 1, r.json["deadletter"].(map[string]any)["run"])
}
