package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// setupCfg is setup with cfg instead of testConfig().
func setupCfg(t *testing.T, cfg *config.Config) env {
	t.Helper()
	e := setup(t, api.Options{})
	s := api.New(e.rdb, cfg, api.Options{Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

// TestEnqueueRefusesRunSeparator (issue #11 item 1): '#' in a task ID is
// 400 invalid_request naming field "id" and why, single or in a batch; a
// task "X#1" can no longer be taken for run 1 of task X.
func TestEnqueueRefusesRunSeparator(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	client := tasks.NewClient(e.rdb)
	_, err := client.Enqueue(ctx, tasks.Task{ID: "X", Agent: "tool"})
	require.NoError(t, err)
	require.NoError(t, client.EnqueueRun(ctx, &tasks.Envelope{ID: "X", Agent: "tool", Queue: "default", Run: 1}, time.Hour))

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"X#1","agent":"tool"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `field "id"`, `"#"`, "reserved", "run N of task X has the ID X#N")

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"ok-1","agent":"tool"},{"id":"a#b","agent":"tool"}]}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, "tasks[1]", `field "id"`, "reserved")
	require.EqualValues(t, 1, r.json["index"])

	for _, id := range []string{"X#1", "a#b", "ok-1"} {
		ok, err := e.store.Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, "%s has no record", id)
	}
	info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetTaskInfo("default", "X#1")
	require.NoError(t, err)
	env, err := tasks.Decode(info.Payload)
	require.NoError(t, err)
	require.Equal(t, "X", env.ID, "X#1 is still run 1 of X")
	require.Equal(t, 1, env.Run)
}

// TestEnqueueQueues (issue #11 item 15): a queue outside worker.queues is
// 400 invalid_request naming it and the served queues (sorted); a served
// non-default queue is accepted and the task lands on it.
func TestEnqueueQueues(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Worker.Queues = map[string]int{"high": 5, "default": 1}
	e := setupCfg(t, cfg)
	ctx := context.Background()

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"q1","agent":"tool","queue":"low"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `field "queue"`, `"low"`, "served queues: default, high")
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"q2","agent":"tool","queue":"high"},{"id":"q3","agent":"tool","queue":"hi"}]}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, "tasks[1]", `"hi"`, "served queues: default, high")
	require.EqualValues(t, 1, r.json["index"])
	for _, id := range []string{"q1", "q2", "q3"} {
		ok, err := e.store.Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, id)
	}

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"q4","agent":"tool","queue":"high"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"q5","agent":"tool","queue":"high"},{"id":"q6","agent":"tool"}]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.EqualValues(t, 2, r.json["created"])
	n, err := e.rdb.LLen(ctx, "asynq:{high}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = e.rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// The default config serves only "default".
	r = do(t, "POST", setup(t, api.Options{}).url+"/api/v1/tasks", "", `{"agent":"tool","queue":"high"}`)
	requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `"high"`, "served queues: default")
}

// TestEnqueueDeadLetterID (issue #11 item 6): the ID of a dead letter whose
// record has expired answers 200 duplicate with state dead_lettered and
// the dead letter shown as the task; the dead letter stays and nothing is
// queued (single and batch).
func TestEnqueueDeadLetterID(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	dlq := deadletter.NewStore(e.rdb)
	_, err := dlq.Put(ctx, &deadletter.Entry{ID: "gone", Agent: "tool", Action: "old", ErrorClass: "logic_error", Error: "boom",
		Reason: deadletter.ReasonNotRetryable, Attempts: 2, Params: json.RawMessage(`{"n":1}`), Queue: "default",
		DeadLetteredAt: time.Unix(1700000000, 0).UTC(), History: []tasks.Event{{Event: tasks.EventDeadLettered, Attempt: 2}}})
	require.NoError(t, err)
	before, err := dlq.Get(ctx, "gone")
	require.NoError(t, err)

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"gone","agent":"tool","action":"new"}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, true, r.json["duplicate"])
	require.Equal(t, false, r.json["created"])
	require.Equal(t, "dead_lettered", r.json["state"])
	task, ok := r.json["task"].(map[string]any)
	require.True(t, ok, r.body)
	require.Equal(t, "old", task["action"])
	require.Equal(t, "dead_lettered", task["state"])
	require.Equal(t, "logic_error", task["error_class"])
	require.EqualValues(t, 2, task["attempts"])
	require.Len(t, task["history"], 1)

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"gone","agent":"tool"},{"id":"new","agent":"tool"}]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.EqualValues(t, 1, r.json["created"])
	require.EqualValues(t, 1, r.json["duplicates"])
	first := r.json["results"].([]any)[0].(map[string]any)
	require.Equal(t, true, first["duplicate"])
	require.Equal(t, "dead_lettered", first["state"])

	after, err := dlq.Get(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, before, after, "the dead letter is intact")
	ok, err = e.store.Exists(ctx, "gone")
	require.NoError(t, err)
	require.False(t, ok)
	n, err := e.rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the new task was queued")
}

// TestEnqueueRetention (issue #11 item 7): records of tasks the API
// enqueues live for the config's history.retention, counted from when the
// first run is due.
func TestEnqueueRetention(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.History.Retention = time.Hour
	e := setupCfg(t, cfg)
	ctx := context.Background()
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"r1","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"r2","agent":"tool","in":"720h"},{"id":"r3","agent":"tool"}]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"r4","agent":"tool","in":"720h"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	for id, want := range map[string]time.Duration{"r1": time.Hour, "r3": time.Hour, "r2": 721 * time.Hour, "r4": 721 * time.Hour} {
		for _, key := range []string{rkeys.Task(id), rkeys.TaskHistory(id)} {
			ttl, err := e.rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, ttl, want, key)
			require.Greater(t, ttl, want-time.Minute, key)
		}
	}
}
