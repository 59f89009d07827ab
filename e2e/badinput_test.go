package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// pythonQuotaTraceback is what the OpenAI Python SDK prints when an account
// has run out of credit: a 429 that must not be retried.
const pythonQuotaTraceback = `Traceback (most recent call last):
  File "/app/agent.py", line 42, in <module>
    resp = client.chat.completions.create(model="gpt-4o", messages=messages)
  File "/usr/local/lib/python3.12/site-packages/openai/_utils/_utils.py", line 279, in wrapper
    return func(*args, **kwargs)
  File "/usr/local/lib/python3.12/site-packages/openai/_base_client.py", line 1059, in _request
    raise self._make_status_error_from_response(err.response) from None
openai.RateLimitError: Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your plan and billing details.', 'type': 'insufficient_quota', 'code': 'insufficient_quota'}}
`

// TestBadInputCorpus feeds one real worker process a corpus of hostile
// inputs: payloads that are not envelopes (pushed behind agentq's back),
// unknown agents, params too big or too deep, and agents that print
// garbage, flood stdout, hang with children, crash with a provider
// traceback or refuse the request. Every one must end in the dead letters
// with its class, a reason and an error text, as `inspector dlq list --json`
// shows; nothing may land in asynq's archive instead; and the worker must
// keep serving: afterwards it is alive, healthy, and runs a normal task.
func TestBadInputCorpus(t *testing.T) {
	t.Parallel()
	const toolTimeout = 2 * time.Minute
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	pidFile := filepath.Join(t.TempDir(), "hang-pids")
	// max_restarts 0: a restartable class is dead-lettered at once
	// (restart_not_enabled); the breaker never opens during the corpus.
	// Only the hanger has a short timeout: every other input must end for
	// its own reason (the output cap, a bad reply, …), which must not race
	// a timeout on a busy machine (a -race agent echoing 5 MiB of params
	// can take seconds there).
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 3s}
defaults:
  timeout: %s
  retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 50ms, jitter: 0}
  circuit_breaker: {failure_threshold: 1000}
  restart: {max_restarts: 0, delays: []}
agents:
  tool: {exec: {command: [%q]}}
  hanger:
    exec: {command: [%q]}
    timeout: 3s
    retry: {max_attempts: 1}
`, toolTimeout, b.agent, b.agent))
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	// Raw payloads, keyed by their asynq task ID. The dead letter is found
	// by its payload (kept verbatim), whatever ID the worker files it under.
	tooDeep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	raw := []struct {
		id      string
		payload []byte
	}{
		{"raw-not-json", []byte("hello, I am not JSON")},
		{"raw-truncated", []byte(`{"id":"raw-truncated","agent":"tool","params":{"mode":"ec`)},
		{"raw-array", []byte(`[{"id":"raw-array","agent":"tool"}]`)},
		{"raw-agent-type", []byte(`{"id":"raw-agent-type","agent":42}`)},
		{"raw-empty", []byte{}},
		{"raw-bad-utf8", []byte("\xff\xfe\xfd\x00\xc3\x28 binary")},
		{"raw-brace-id", []byte(`{"id":"bad{id}","agent":"tool","params":{"mode":"echo"}}`)},
		{"raw-long-id", []byte(`{"id":"` + strings.Repeat("L", 300) + `","agent":"tool","params":{}}`)},
		{"raw-no-agent", []byte(`{"id":"raw-no-agent","params":{"mode":"echo"}}`)},
		{"raw-trailing", []byte(`{"id":"raw-trailing","agent":"tool"} {"id":"x"}`)},
		{"raw-too-deep", []byte(`{"id":"raw-too-deep","agent":"tool","params":` + tooDeep + `}`)},
	}
	aq := asynq.NewClientFromRedisClient(rdb)
	for _, r := range raw {
		_, err := aq.Enqueue(asynq.NewTask(tasks.TypeName, r.payload), asynq.TaskID(r.id))
		require.NoError(t, err, r.id)
	}

	// Envelopes that are valid but hostile.
	type want struct {
		class, reason string
		errHas        string // substring of the error text ("" → any)
	}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	blob, err := json.Marshal(map[string]string{"mode": "echo", "blob": strings.Repeat("x", 5<<20)})
	require.NoError(t, err)
	hostile := []struct {
		id, agent, params string
		want              want
	}{
		{"huge-params", "tool", string(blob), want{"logic_error", "not_retryable", "exceeds"}},
		{"deep-params", "tool", deep, want{}}, // any class; must be kept and retrievable
		{"garbage", "tool", `{"mode":"garbage"}`, want{"logic_error", "not_retryable", "not an ActionResponse"}},
		{"flood", "tool", `{"mode":"huge","mb":100}`, want{"logic_error", "not_retryable", "exceeds 4194304 bytes"}},
		{"hang", "hanger", fmt.Sprintf(`{"mode":"hang","children":2,"pid_file":%q,"ignore_term":true}`, pidFile),
			want{"timeout", "restart_not_enabled", "timed out"}},
		{"quota", "tool", mustJSON(t, map[string]any{"mode": "exit", "code": 1, "stderr": pythonQuotaTraceback}),
			want{"quota_exhausted", "not_retryable", "insufficient_quota"}},
		{"refused", "tool", `{"mode":"error","code":400,"error":"Invalid 'messages': expected an array"}`,
			want{"invalid_request", "not_retryable", "Invalid 'messages'"}},
		{"not-impl", "tool", `{"mode":"error","code":501,"error":"action not implemented"}`,
			want{"not_supported", "not_retryable", "not implemented"}},
	}
	cl := tasks.NewClient(rdb)
	for _, h := range hostile {
		_, err := cl.Enqueue(t.Context(), tasks.Task{ID: h.id, Agent: h.agent, Params: json.RawMessage(h.params)})
		require.NoError(t, err, h.id)
	}
	// An unknown agent, through the enqueuer binary.
	_, errOut, code := run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "ghost", "--id", "ghost", "--params", `{}`)
	require.Equal(t, 0, code, errOut)

	// Wait until every input is dead-lettered.
	total := len(raw) + len(hostile) + 1
	dlq := deadletter.NewStore(rdb)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n, err := dlq.Count(t.Context())
		require.NoError(t, err)
		if int(n) >= total {
			break
		}
		if time.Now().After(deadline) {
			ids, _ := dlq.IDs(t.Context(), deadletter.Filter{})
			t.Fatalf("only %d of %d inputs dead-lettered in time: %v", n, total, ids)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The dead letters, through the inspector binary.
	out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "list", "--json")
	require.Equal(t, 0, code, errOut)
	byID := map[string]*deadletter.Entry{}
	var entries []*deadletter.Entry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e deadletter.Entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), tail(line, 300))
		require.NotEmpty(t, e.Reason, e.ID)
		require.NotEmpty(t, e.Error, e.ID)
		require.NotEmpty(t, e.ErrorClass, e.ID)
		require.NotEmpty(t, e.History, e.ID)
		byID[e.ID] = &e
		entries = append(entries, &e)
	}
	require.Len(t, entries, total, "exactly one dead letter per input")

	for _, r := range raw {
		var found *deadletter.Entry
		for _, e := range entries {
			if e.Reason == deadletter.ReasonInvalidPayload && bytes.Equal(e.Payload, r.payload) {
				require.Nil(t, found, "%s dead-lettered twice", r.id)
				found = e
			}
		}
		require.NotNil(t, found, "%s: no invalid_payload dead letter holding its payload", r.id)
		require.Equal(t, "invalid_request", found.ErrorClass, r.id)
		require.Contains(t, found.Error, "malformed task payload", r.id)
		t.Logf("%-15s → %s as %q: %s", r.id, found.ErrorClass, found.ID, tail(found.Error, 160))
	}

	for _, h := range hostile {
		e := byID[h.id]
		require.NotNil(t, e, "%s not dead-lettered", h.id)
		t.Logf("%-15s → %s/%s after %d attempt(s), the last %dms: %s", h.id, e.ErrorClass, e.Reason, e.Attempts, e.History[len(e.History)-1].DurationMS, tail(e.Error, 160))
		if h.want.class != "" {
			require.Equal(t, h.want.class, e.ErrorClass, h.id)
			require.Equal(t, h.want.reason, e.Reason, h.id)
		}
		require.Contains(t, e.Error, h.want.errHas, h.id)
		require.Equal(t, h.agent, e.Agent, h.id)
	}
	ghost := byID["ghost"]
	require.NotNil(t, ghost)
	require.Equal(t, "not_supported", ghost.ErrorClass)
	require.Equal(t, deadletter.ReasonUnknownAgent, ghost.Reason)
	require.Contains(t, ghost.Error, `unknown agent "ghost"`)

	// The flood was cut at the cap (its class says so), not left to write
	// its 100 MiB until the timeout.
	flood := byID["flood"].History
	require.Less(t, flood[len(flood)-1].DurationMS, (toolTimeout / 2).Milliseconds(), "a flooding agent is stopped at the cap")
	// The oversized params are kept whole for a replay.
	require.JSONEq(t, string(blob), string(byID["huge-params"].Params))

	// The hanging agent's children are gone with it.
	var pids []int
	pb, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the hanging agent wrote its children's PIDs")
	for _, f := range strings.Fields(string(pb)) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, n)
	}
	require.Len(t, pids, 2)
	for _, pid := range pids {
		requireGone(t, pid, 10*time.Second)
	}

	// The deeply nested params survive, and `dlq show --json` returns them.
	out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "dlq", "show", "deep-params", "--json")
	require.Equal(t, 0, code, errOut)
	var shown deadletter.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.Equal(t, "deep-params", shown.ID)
	require.Equal(t, deep, string(shown.Params))
	require.NotEmpty(t, shown.ErrorClass)

	// Nothing fell through to asynq's archive (the dead-letter store took all).
	archived, err := asynq.NewInspectorFromRedisClient(rdb).ListArchivedTasks(tasks.DefaultQueue)
	require.NoError(t, err)
	require.Empty(t, archived)

	// The worker keeps serving.
	_, err = cl.Enqueue(t.Context(), tasks.Task{ID: "after-1", Agent: "tool", Params: json.RawMessage(`{"mode":"echo","n":1}`)})
	require.NoError(t, err)
	v := waitStates(t, rdb, []string{"after-1"}, 20*time.Second)["after-1"]
	require.Equal(t, tasks.StateSucceeded, v.State)
	select {
	case <-w.done:
		t.Fatalf("worker exited: %v", w.err)
	default:
	}
	resp, err := http.Get("http://" + ops + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	logb, err := os.ReadFile(w.log)
	require.NoError(t, err)
	require.NotContains(t, string(logb), "panic")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
