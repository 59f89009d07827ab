// Package e2e holds end-to-end tests: real worker, enqueuer and inspector
// processes, real exec agents, HTTP agents on loopback and a real
// redis-server started for each test.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// backend is an HTTP agent backend on loopback that counts calls per task.
type backend struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	bad   atomic.Bool // /flip answers 400 while true
}

func newBackend(t *testing.T) *backend {
	b := &backend{calls: map[string]int{}}
	b.bad.Store(true)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID string `json:"task_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		b.mu.Lock()
		b.calls[r.URL.Path+" "+req.TaskID]++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/ok" || (r.URL.Path == "/flip" && !b.bad.Load()):
			fmt.Fprintf(w, `{"answer":42,"task":%q}`, req.TaskID)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"Invalid 'messages': expected an array","type":"invalid_request_error","code":null}}`)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) count(path, id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[path+" "+id]
}

func writeConfig(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestCoreEndToEnd runs a real worker process with exec agents and an HTTP
// agent on loopback: successes, a connection reset twice then success, a
// 400 dead-lettered after one attempt, garbage output, an unknown agent and
// an undecodable payload. Every task must end in exactly the expected state
// and `inspector dlq list --json` must list exactly the expected dead letters.
// Then a dead letter is requeued and runs again with a fresh budget, its
// history kept.
func TestCoreEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newBackend(t)
	state := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`
worker:
  concurrency: 8
  shutdown_timeout: 5s
defaults:
  timeout: 10s
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 400ms, jitter: 0.1}
  # Four connection resets in a row must not open the breaker here (the
  # breaker has its own end-to-end tests).
  circuit_breaker: {failure_threshold: 10}
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
  api:
    http: {url: %q}
  flip:
    http: {url: %q}
`, b.agent, be.srv.URL+"/ok", be.srv.URL+"/flip"))

	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	lines := []string{
		`{"id":"ok-1","agent":"tool","action":"status","params":{"mode":"echo","n":1}}`,
		`{"id":"ok-2","agent":"tool","params":{"mode":"echo","n":2}}`,
		fmt.Sprintf(`{"id":"flaky-1","agent":"tool","params":{"mode":"fail_then_succeed","times":2,"state_dir":%q}}`, state),
		fmt.Sprintf(`{"id":"flaky-2","agent":"tool","params":{"mode":"fail_then_succeed","times":2,"state_dir":%q}}`, state),
		`{"id":"http-ok-1","agent":"api","action":"chat","params":{"q":"hi"}}`,
		`{"id":"http-bad-1","agent":"flip","action":"chat","params":{"q":"bad"}}`,
		`{"id":"garbage-1","agent":"tool","params":{"mode":"garbage"}}`,
		`{"id":"ghost-1","agent":"ghost","params":{}}`,
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"ok-1", "ok-2", "flaky-1", "flaky-2", "http-ok-1", "http-bad-1", "garbage-1", "ghost-1"},
		strings.Fields(out))

	// The same ID again is not enqueued twice.
	out, errOut, code = run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "tool", "--id", "ok-1", "--params", `{"mode":"echo"}`)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "ok-1", strings.TrimSpace(out))
	require.Contains(t, errOut, "already exists")

	// A payload that is not an envelope, put on the queue behind agentq's back.
	aq := asynq.NewClientFromRedisClient(rdb)
	_, err := aq.Enqueue(asynq.NewTask(tasks.TypeName, []byte(`{"id": "bad-payload-1", "agent": 42`)), asynq.TaskID("bad-payload-1"))
	require.NoError(t, err)

	ids := []string{"ok-1", "ok-2", "flaky-1", "flaky-2", "http-ok-1", "http-bad-1", "garbage-1", "ghost-1", "bad-payload-1"}
	views := waitStates(t, rdb, ids, 60*time.Second)

	want := map[string]struct {
		state    tasks.State
		attempts int
		class    string
	}{
		"ok-1":          {tasks.StateSucceeded, 1, ""},
		"ok-2":          {tasks.StateSucceeded, 1, ""},
		"flaky-1":       {tasks.StateSucceeded, 3, ""},
		"flaky-2":       {tasks.StateSucceeded, 3, ""},
		"http-ok-1":     {tasks.StateSucceeded, 1, ""},
		"http-bad-1":    {tasks.StateDeadLettered, 1, "invalid_request"},
		"garbage-1":     {tasks.StateDeadLettered, 1, "logic_error"},
		"ghost-1":       {tasks.StateDeadLettered, 0, "not_supported"},
		"bad-payload-1": {tasks.StateDeadLettered, 0, "invalid_request"},
	}
	for id, wv := range want {
		v := views[id]
		require.Equal(t, wv.state, v.State, id)
		require.Equal(t, wv.attempts, v.Attempts, id)
		require.Equal(t, wv.class, v.ErrorClass, id)
	}
	// A success keeps the agent's result data.
	require.JSONEq(t, `{"mode":"echo","n":1}`, string(views["ok-1"].Result))
	require.JSONEq(t, `{"answer":42,"task":"http-ok-1"}`, string(views["http-ok-1"].Result))

	// The retries of a flaky task are in its history, classified.
	var retries []tasks.Event
	for _, ev := range views["flaky-1"].History {
		if ev.Event == tasks.EventRetrying {
			retries = append(retries, ev)
		}
	}
	require.Len(t, retries, 2)
	for i, ev := range retries {
		require.Equal(t, "network_transient", ev.ErrorClass)
		require.Equal(t, i+1, ev.Attempt)
		require.Positive(t, ev.DelayMS)
		require.Contains(t, ev.Error, "connection reset by peer")
	}
	require.Equal(t, 1, be.count("/flip", "http-bad-1"), "a 400 is not retried")

	// inspector dlq list --json lists exactly the expected dead letters.
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "list", "--json")
	require.Equal(t, 0, code, errOut)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e deadletter.Entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		got[e.ID] = e.ErrorClass
		require.NotEmpty(t, e.History, e.ID)
	}
	require.Equal(t, map[string]string{
		"http-bad-1": "invalid_request", "garbage-1": "logic_error",
		"ghost-1": "not_supported", "bad-payload-1": "invalid_request",
	}, got)

	// Filter by class.
	out, _, code = run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "list", "--class", "invalid_request", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, 2, strings.Count(strings.TrimSpace(out), "\n")+1)

	// Requeue: the backend is fixed; the task runs again with a fresh budget and keeps its history.
	be.bad.Store(false)
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "requeue", "http-bad-1")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "http-bad-1", strings.TrimSpace(out))
	views = waitStates(t, rdb, []string{"http-bad-1"}, 30*time.Second)
	v := views["http-bad-1"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	events := []string{}
	for _, ev := range v.History {
		events = append(events, ev.Event)
	}
	require.Equal(t, []string{"queued", "dead_lettered", "requeued", "succeeded"}, events)
	require.Equal(t, 1, v.History[3].Attempt, "a requeued task starts a fresh budget")
	require.Equal(t, 2, be.count("/flip", "http-bad-1"))
	_, err = deadletter.NewStore(rdb).Get(context.Background(), "http-bad-1")
	require.ErrorIs(t, err, deadletter.ErrNotFound)

	// inspector task ID --json shows the stable task shape.
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "task", "flaky-1", "--json")
	require.Equal(t, 0, code, errOut)
	var tv map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &tv))
	keys := []string{}
	for k := range tv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range []string{"id", "agent", "action", "state", "attempts", "restarts", "error_class", "error", "history"} {
		require.Contains(t, keys, k)
	}

	// SIGTERM: the worker stops cleanly.
	require.Equal(t, 0, w.stop(t, 15*time.Second))
}

// TestCommandsRedisUnreachable: every command reports an unreachable Redis
// with exit status 1 and a message that says so.
func TestCommandsRedisUnreachable(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	url := "redis://" + freeAddr(t) + "/0" // nothing listens there
	for _, tc := range []struct {
		bin  string
		args []string
	}{
		{b.enqueuer, []string{"--agent", "a"}},
		{b.worker, nil},
		{b.inspector, []string{"dlq", "list"}},
		{b.inspector, []string{"stats"}},
		{b.inspector, []string{"breakers"}},
		{b.inspector, []string{"task", "x"}},
	} {
		_, errOut, code := run(t, "", tc.bin, append([]string{"--redis", url}, tc.args...)...)
		require.Equal(t, 1, code, "%s %v: %s", tc.bin, tc.args, errOut)
		require.Contains(t, errOut, "redis unreachable", "%s %v", tc.bin, tc.args)
	}
}

// TestCommandsVersion (#39 item 3): every built binary answers --version
// with "<binary> <version> (<revision>)", exit 0, without Redis.
func TestCommandsVersion(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	for name, bin := range map[string]string{"worker": b.worker, "enqueuer": b.enqueuer, "inspector": b.inspector} {
		out, errOut, code := run(t, "", bin, "--version")
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		require.Regexp(t, `^`+name+` `+regexp.QuoteMeta(buildinfo.Version())+` \((?:[0-9a-f]{40}|unknown)\)\n$`, out)
	}
}

// TestCommandsBadUsage: bad flags, bad JSON and bad config are exit 2 with
// a message naming the problem.
func TestCommandsBadUsage(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	badCfg := writeConfig(t, "agents:\n  x:\n    timeout: -1s\n")
	unknownCfg := writeConfig(t, "worker:\n  concurency: 3\n")
	for _, tc := range []struct {
		bin  string
		args []string
		want string
	}{
		{b.enqueuer, []string{"--agent", "a", "--params", "{nope"}, "not valid JSON"},
		{b.enqueuer, nil, "--agent is required"},
		{b.enqueuer, []string{"--agent", "a", "--bogus"}, "unknown flag"},
		{b.inspector, []string{"dlq", "purge"}, "--yes"},
		{b.inspector, []string{"breaker", "trip", "k"}, "--for"},
		{b.inspector, []string{"dlq", "list", "--class", "nope"}, "unknown error class"},
		{b.worker, []string{"--config", badCfg}, "agents.x.timeout"},
		{b.worker, []string{"--config", unknownCfg}, "worker.concurency"},
		{b.inspector, []string{"frobnicate"}, "unknown command"},
	} {
		_, errOut, code := run(t, "", tc.bin, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}
