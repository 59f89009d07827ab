package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

const token = "s3cret-token"

// testConfig names two agents: tool (its own breaker) and llm (breaker
// key llm.example).
func testConfig() *config.Config {
	cfg := config.Default()
	cfg.Agents = map[string]config.Agent{
		"tool": {Name: "tool", Settings: cfg.Defaults.Clone()},
		"llm": {Name: "llm", BreakerKey: "llm.example", Settings: cfg.Defaults.Clone(),
			Limits: &config.Limits{Key: "openai-prod", Requests: 500, Per: time.Minute, Concurrency: 20}, Notify: []string{"audit"}},
	}
	cfg.Webhooks = map[string]config.Webhook{"results": {URL: "https://hooks.example/r", Secret: "${RESULTS_SECRET}"},
		"audit": {URL: "https://hooks.example/a", Secret: "${AUDIT_SECRET}"}}
	cfg.Schedules = map[string]config.Schedule{"beat": {Cron: "@every 1m", Agent: "tool", Action: "beat"},
		"nightly": {Cron: "30 1 * * *", Timezone: "Europe/Paris", Agent: "llm", Overlap: "skip"}}
	return cfg
}

type env struct {
	url   string
	srv   *redistest.Server
	rdb   *redis.Client
	store *tasks.Store
}

func setup(t testing.TB, opts api.Options) env {
	t.Helper()
	return setupWith(t, opts, testConfig())
}

// setupWith is setup with the API's config cfg.
func setupWith(t testing.TB, opts api.Options, cfg *config.Config) env {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := api.New(rdb, cfg, opts)
	t.Cleanup(s.Close)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return env{url: hs.URL, srv: srv, rdb: rdb, store: tasks.NewStore(rdb)}
}

type reply struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func do(t testing.TB, method, url, tok, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return roundTrip(t, &http.Client{Timeout: 20 * time.Second}, req)
}

// roundTrip sends req with c and reads the reply (its JSON parsed when it
// says it is JSON).
func roundTrip(t testing.TB, c *http.Client, req *http.Request) reply {
	t.Helper()
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(b, &r.json), string(b))
	}
	return r
}

// requireError checks an error reply's status, code and message.
func requireError(t *testing.T, r reply, status int, code string, contains ...string) {
	t.Helper()
	require.Equal(t, status, r.status, r.body)
	require.Equal(t, code, r.json["code"], r.body)
	msg, _ := r.json["error"].(string)
	require.NotEmpty(t, msg, r.body)
	for _, c := range contains {
		require.Contains(t, msg, c)
	}
}

func TestEnqueueSingle(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"t1","agent":"tool","action":"run","params":{"x":1},"correlation_id":"c1"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.Equal(t, "t1", r.json["id"])
	require.Equal(t, true, r.json["created"])
	require.Equal(t, false, r.json["duplicate"])
	require.Equal(t, "pending", r.json["state"])
	require.Equal(t, "/api/v1/tasks/t1", r.header.Get("Location"))
	v, err := e.store.Get(ctx, "t1")
	require.NoError(t, err)
	require.Equal(t, "tool", v.Agent)
	require.Equal(t, "c1", v.CorrelationID)

	// The same ID again: 200 with the existing task, nothing enqueued twice.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"t1","agent":"tool","action":"other"}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, false, r.json["created"])
	require.Equal(t, true, r.json["duplicate"])
	task, ok := r.json["task"].(map[string]any)
	require.True(t, ok, r.body)
	require.Equal(t, "run", task["action"], "the existing task, not the repeat")
	n, err := e.rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// No ID: a random one; "in": scheduled.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"agent":"tool","in":"1h"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.Len(t, r.json["id"], 24)
	require.Equal(t, "scheduled", r.json["state"])
}

func TestEnqueueBadRequests(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{MaxBody: 1024})
	big := fmt.Sprintf(`{"agent":"tool","params":{"blob":%q}}`, strings.Repeat("x", 2000))
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
		contains                 []string
	}{
		{"malformed", "POST", "/api/v1/tasks", "{\"agent\":\"tool\",\n \"params\": {]}", 400, api.CodeInvalidRequest, []string{"malformed JSON", "line 2, column", "invalid character"}},
		{"truncated", "POST", "/api/v1/tasks", `{"agent":"tool"`, 400, api.CodeInvalidRequest, []string{"unexpected end"}},
		{"trailing data", "POST", "/api/v1/tasks", `{"agent":"tool"} {}`, 400, api.CodeInvalidRequest, []string{"malformed JSON", "after top-level value"}},
		{"not an object", "POST", "/api/v1/tasks", `[1,2]`, 400, api.CodeInvalidRequest, []string{"must be a JSON object, got JSON array"}},
		{"batch item not an object", "POST", "/api/v1/tasks", `{"tasks":[{"agent":"tool"},"x"]}`, 400, api.CodeInvalidRequest, []string{"tasks[1] must be a JSON object, got JSON string"}},
		{"empty", "POST", "/api/v1/tasks", ``, 400, api.CodeInvalidRequest, []string{"empty"}},
		{"wrong type", "POST", "/api/v1/tasks", `{"agent":42}`, 400, api.CodeInvalidRequest, []string{`field "agent"`, "string"}},
		{"unknown field", "POST", "/api/v1/tasks", `{"agent":"tool","paramz":{}}`, 400, api.CodeInvalidRequest, []string{`unknown field "paramz"`}},
		{"missing agent", "POST", "/api/v1/tasks", `{"id":"x"}`, 400, api.CodeInvalidRequest, []string{`"agent" is required`}},
		{"unknown agent", "POST", "/api/v1/tasks", `{"agent":"nope"}`, 400, api.CodeInvalidRequest, []string{`unknown agent "nope"`, "llm", "tool"}},
		{"bad id", "POST", "/api/v1/tasks", `{"id":"a{b}","agent":"tool"}`, 400, api.CodeInvalidRequest, []string{`"id"`}},
		{"bad in", "POST", "/api/v1/tasks", `{"agent":"tool","in":"soon"}`, 400, api.CodeInvalidRequest, []string{`"in"`, "soon"}},
		{"too large", "POST", "/api/v1/tasks", big, 413, api.CodeRequestTooLarge, []string{"1024 bytes"}},
		{"empty batch", "POST", "/api/v1/tasks", `{"tasks":[]}`, 400, api.CodeInvalidRequest, []string{"empty"}},
		{"wrong method", "DELETE", "/api/v1/tasks", ``, 405, api.CodeMethodNotAllowed, []string{"POST"}},
		{"unknown route", "GET", "/api/v2/nothing", ``, 404, api.CodeNotFound, []string{"/api/v2/nothing"}},
		{"bad limit", "GET", "/api/v1/deadletters?limit=5000", ``, 400, api.CodeInvalidRequest, []string{"limit", "1000"}},
		{"negative offset", "GET", "/api/v1/deadletters?offset=-1", ``, 400, api.CodeInvalidRequest, []string{"offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := do(t, tc.method, e.url+tc.path, "", tc.body)
			requireError(t, r, tc.status, tc.code, tc.contains...)
			if tc.status == 405 {
				require.Equal(t, "GET, POST", r.header.Get("Allow"), "GET lists tasks, POST enqueues")
			}
		})
	}
	n, err := e.rdb.Exists(context.Background(), "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.Zero(t, n, "no bad request enqueued anything")
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()

	// One bad item: nothing is enqueued, the index is named.
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"b1","agent":"tool"},{"id":"b2","agent":"ghost"}]}`)
	requireError(t, r, 400, api.CodeInvalidRequest, "tasks[1]", `unknown agent "ghost"`)
	require.EqualValues(t, 1, r.json["index"])
	ok, err := e.store.Exists(ctx, "b1")
	require.NoError(t, err)
	require.False(t, ok, "nothing enqueued when an item is invalid")
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"agent":"tool"},{"agent":"tool","bogus":1}]}`)
	requireError(t, r, 400, api.CodeInvalidRequest, "tasks[1]", `unknown field "bogus"`)

	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"id":"b%d","agent":"tool","params":{"i":%d}}`, i, i))
	}
	items = append(items, `{"id":"b0","agent":"tool"}`, `{"agent":"llm"}`) // a repeat within the batch; no ID
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[`+strings.Join(items, ",")+`]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.EqualValues(t, 21, r.json["created"])
	require.EqualValues(t, 1, r.json["duplicates"])
	require.EqualValues(t, 0, r.json["failed"])
	results := r.json["results"].([]any)
	require.Len(t, results, 22)
	for i, res := range results {
		m := res.(map[string]any)
		require.EqualValues(t, i, m["index"])
		require.Equal(t, i != 20, m["created"], m)
		if i < 20 {
			require.Equal(t, fmt.Sprintf("b%d", i), m["id"])
		}
	}
	require.Equal(t, true, results[20].(map[string]any)["duplicate"])
	for i := range 20 {
		v, err := e.store.Get(ctx, fmt.Sprintf("b%d", i))
		require.NoError(t, err)
		require.Equal(t, tasks.StatePending, v.State)
	}
	n, err := e.rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 21, n)

	// The whole batch again (IDs only): 200, all duplicates.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[`+strings.Join(items[:20], ",")+`]}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.EqualValues(t, 0, r.json["created"])
	require.EqualValues(t, 20, r.json["duplicates"])

	// Too many tasks.
	s := api.New(e.rdb, testConfig(), api.Options{MaxBatch: 2})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	r = do(t, "POST", hs.URL+"/api/v1/tasks", "", `{"tasks":[{"agent":"tool"},{"agent":"tool"},{"agent":"tool"}]}`)
	requireError(t, r, 400, api.CodeInvalidRequest, "at most 2")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: token})
	for _, tc := range []struct {
		name, method, path, tok, body string
		status                        int
	}{
		{"missing token", "POST", "/api/v1/tasks", "", `{"agent":"tool"}`, 401},
		{"wrong token", "POST", "/api/v1/tasks", "wrong", `{"agent":"tool"}`, 401},
		{"prefix of token", "GET", "/api/v1/agents", token[:4], ``, 401},
		{"missing token on get", "GET", "/api/v1/tasks/x", "", ``, 401},
		{"missing token on dlq", "GET", "/api/v1/deadletters", "", ``, 401},
		{"missing token on requeue", "POST", "/api/v1/deadletters/x/requeue", "", ``, 401},
		{"right token", "POST", "/api/v1/tasks", token, `{"agent":"tool"}`, 202},
		{"healthz needs none", "GET", "/healthz", "", ``, 200},
		{"openapi needs none", "GET", "/api/v1/openapi.yaml", "", ``, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := do(t, tc.method, e.url+tc.path, tc.tok, tc.body)
			require.Equal(t, tc.status, r.status, r.body)
			if tc.status == 401 {
				requireError(t, r, 401, api.CodeUnauthorized, "bearer token")
				require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
}

func TestFailFast(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	br := breaker.New(e.rdb)
	require.NoError(t, br.Trip(ctx, "llm.example", 10*time.Minute))

	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"ff1","agent":"llm","fail_if_unavailable":true}`)
	requireError(t, r, http.StatusConflict, api.CodeAgentUnavailable, `agent "llm"`, `"llm.example"`)
	require.Equal(t, "llm", r.json["agent"])
	require.Equal(t, "llm.example", r.json["breaker_key"])
	until, err := time.Parse(time.RFC3339Nano, r.json["open_until"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), until, time.Minute)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 600, ra, 60)
	ok, err := e.store.Exists(ctx, "ff1")
	require.NoError(t, err)
	require.False(t, ok, "a refused task is not enqueued")

	// Without fail_if_unavailable the task is queued (it waits for the breaker).
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"ff2","agent":"llm"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	// Another agent's breaker is closed.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"ff3","agent":"tool","fail_if_unavailable":true}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)

	// A batch-wide flag refuses the batch and names the index; nothing enqueued.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"fail_if_unavailable":true,"tasks":[{"id":"ff4","agent":"tool"},{"id":"ff5","agent":"llm"}]}`)
	requireError(t, r, http.StatusConflict, api.CodeAgentUnavailable, "tasks[1]", "nothing was enqueued")
	require.EqualValues(t, 1, r.json["index"])
	ok, err = e.store.Exists(ctx, "ff4")
	require.NoError(t, err)
	require.False(t, ok)

	// Past open_until the breaker would admit a trial: available.
	later := api.New(e.rdb, testConfig(), api.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	hs := httptest.NewServer(later.Handler())
	defer hs.Close()
	r = do(t, "POST", hs.URL+"/api/v1/tasks", "", `{"id":"ff6","agent":"llm","fail_if_unavailable":true}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
}

func TestCheckAvailable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	br := breaker.New(rdb)
	cfg := testConfig()
	require.NoError(t, br.Trip(ctx, "llm.example", time.Minute))
	require.NoError(t, br.Trip(ctx, "adhoc", time.Minute))
	now := time.Now()
	for _, tc := range []struct {
		name, agent string
		now         time.Time
		key         string // "" → available
	}{
		{"open breaker via breaker_key", "llm", now, "llm.example"},
		{"closed breaker", "tool", now, ""},
		{"unconfigured agent: breaker named after it", "adhoc", now, "adhoc"},
		{"past open_until (half-open next)", "llm", now.Add(2 * time.Minute), ""},
		{"never used", "fresh", now, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { // not parallel: Redis is killed below
			err := api.CheckAvailableAt(ctx, br, cfg, tc.agent, tc.now)
			if tc.key == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, api.ErrAgentUnavailable)
			var ue *api.UnavailableError
			require.True(t, errors.As(err, &ue))
			require.Equal(t, tc.agent, ue.Agent)
			require.Equal(t, tc.key, ue.BreakerKey)
			require.Equal(t, breaker.StateOpen, ue.State)
			require.True(t, ue.OpenUntil.After(now))
			require.Contains(t, err.Error(), ue.OpenUntil.Format(time.RFC3339))
		})
	}
	// Redis down: the error says so, and is not ErrAgentUnavailable.
	srv.Kill()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := api.CheckAvailable(cctx, br, cfg, "llm")
	require.Error(t, err)
	require.NotErrorIs(t, err, api.ErrAgentUnavailable)
	require.ErrorIs(t, err, breaker.ErrUnavailable)
}

func TestGetTask(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	r := do(t, "GET", e.url+"/api/v1/tasks/nope", "", "")
	requireError(t, r, 404, api.CodeNotFound, `"nope"`)

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"g/1 x","agent":"tool","action":"status"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "GET", e.url+"/api/v1/tasks/g%2F1%20x", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	for _, k := range []string{"id", "agent", "action", "state", "attempts", "restarts", "error_class", "error", "history"} {
		require.Contains(t, r.json, k)
	}
	require.Equal(t, "g/1 x", r.json["id"])
	require.Equal(t, "pending", r.json["state"])
	h := r.json["history"].([]any)
	require.NotEmpty(t, h)
	require.Equal(t, "queued", h[0].(map[string]any)["event"])
}

func TestAgents(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	require.NoError(t, breaker.New(e.rdb).Trip(context.Background(), "llm.example", time.Minute))
	r := do(t, "GET", e.url+"/api/v1/agents", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	agents := r.json["agents"].([]any)
	require.Len(t, agents, 2)
	llm, tool := agents[0].(map[string]any), agents[1].(map[string]any)
	require.Equal(t, "llm", llm["agent"])
	require.Equal(t, "llm.example", llm["key"])
	require.Equal(t, "open", llm["state"])
	require.Equal(t, "unhealthy", llm["health"])
	require.NotNil(t, llm["open_until"])
	lim, ok := llm["limits"].(map[string]any)
	require.True(t, ok, "an agent with limits shows them: %v", llm)
	require.Equal(t, "openai-prod", lim["key"])
	require.EqualValues(t, 500, lim["requests"])
	require.Equal(t, "1m0s", lim["per"])
	require.EqualValues(t, 20, lim["concurrency"])
	require.EqualValues(t, 0, lim["in_flight"])
	require.Contains(t, lim, "paused_until")
	require.NotContains(t, tool, "limits")
	require.Equal(t, "tool", tool["agent"])
	require.Equal(t, "closed", tool["state"])
	require.Equal(t, "healthy", tool["health"])
	for _, k := range []string{"consecutive_failures", "failure_count", "success_count", "last_failure_at", "last_success_at"} {
		require.Contains(t, tool, k)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	dlq := deadletter.NewStore(e.rdb)
	base := time.Unix(1700000000, 0).UTC()
	for i := range 7 {
		agent, class := "tool", "logic_error"
		if i%2 == 1 {
			agent = "llm"
		}
		if i >= 5 {
			class = "quota_exhausted"
		}
		_, err := dlq.Put(ctx, &deadletter.Entry{ID: fmt.Sprintf("d%d", i), Agent: agent, ErrorClass: class, Error: "boom",
			Reason: deadletter.ReasonNotRetryable, Attempts: 1, Params: json.RawMessage(`{"n":1}`), Queue: "default",
			DeadLetteredAt: base.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
	}
	ids := func(r reply) []string {
		var out []string
		for _, d := range r.json["deadletters"].([]any) {
			out = append(out, d.(map[string]any)["id"].(string))
		}
		return out
	}
	for _, tc := range []struct {
		query  string
		want   []string
		total  int
		limit  int
		offset int
	}{
		{"", []string{"d6", "d5", "d4", "d3", "d2", "d1", "d0"}, 7, 50, 0},
		{"?limit=2", []string{"d6", "d5"}, 7, 2, 0},
		{"?limit=2&offset=2", []string{"d4", "d3"}, 7, 2, 2},
		{"?offset=6", []string{"d0"}, 7, 50, 6},
		{"?offset=100", nil, 7, 50, 100},
		{"?agent=llm", []string{"d5", "d3", "d1"}, 3, 50, 0},
		{"?class=quota_exhausted", []string{"d6", "d5"}, 2, 50, 0},
		{"?agent=tool&class=logic_error&limit=1", []string{"d4"}, 3, 1, 0},
	} {
		r := do(t, "GET", e.url+"/api/v1/deadletters"+tc.query, "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.Equal(t, tc.want, ids(r), tc.query)
		require.EqualValues(t, tc.total, r.json["total"], tc.query)
		require.EqualValues(t, tc.limit, r.json["limit"], tc.query)
		require.EqualValues(t, tc.offset, r.json["offset"], tc.query)
	}
	r := do(t, "GET", e.url+"/api/v1/deadletters?limit=1", "", "")
	first := r.json["deadletters"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "agent", "action", "params", "correlation_id", "error_class", "error", "attempts", "restarts", "dead_lettered_at", "history"} {
		require.Contains(t, first, k)
	}

	// Requeue: the entry leaves the store and the task is pending again.
	r = do(t, "POST", e.url+"/api/v1/deadletters/d3/requeue", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "d3", r.json["id"])
	require.Equal(t, "pending", r.json["state"])
	require.Equal(t, "llm", r.json["deadletter"].(map[string]any)["agent"])
	_, err := dlq.Get(ctx, "d3")
	require.ErrorIs(t, err, deadletter.ErrNotFound)
	v, err := e.store.Get(ctx, "d3")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)
	n, err := e.rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	r = do(t, "GET", e.url+"/api/v1/deadletters?agent=llm", "", "")
	require.Equal(t, []string{"d5", "d1"}, ids(r))

	r = do(t, "POST", e.url+"/api/v1/deadletters/d3/requeue", "", "")
	requireError(t, r, 404, api.CodeNotFound, `"d3"`)
	r = do(t, "GET", e.url+"/api/v1/deadletters/d3/requeue", "", "")
	requireError(t, r, 405, api.CodeMethodNotAllowed)

	// A fresh requeue (#37) deletes the task's recorded steps first.
	require.NoError(t, e.rdb.HSet(ctx, rkeys.TaskSteps("d5"), "plan", "1").Err())
	r = do(t, "POST", e.url+"/api/v1/deadletters/d5/requeue", "", `{"fresh":true}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	exists, err := e.rdb.Exists(ctx, rkeys.TaskSteps("d5")).Result()
	require.NoError(t, err)
	require.Zero(t, exists, "the steps were deleted")
}

// TestRedisDown: with Redis killed every Redis-backed route answers 503
// unavailable promptly, and /healthz says so.
func TestRedisDown(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts redis-server, waits out timeouts (10s); skipped with -short (make unit)")
	}
	t.Parallel()
	e := setup(t, api.Options{RedisTimeout: 2 * time.Second})
	r := do(t, "GET", e.url+"/healthz", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "ok", r.json["redis"])
	e.srv.Kill()
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"POST", "/api/v1/tasks", `{"agent":"tool"}`},
		{"POST", "/api/v1/tasks", `{"agent":"llm","fail_if_unavailable":true}`},
		{"POST", "/api/v1/tasks", `{"tasks":[{"agent":"tool"},{"agent":"tool"}]}`},
		{"GET", "/api/v1/tasks/x", ""},
		{"GET", "/api/v1/agents", ""},
		{"GET", "/api/v1/deadletters", ""},
		{"POST", "/api/v1/deadletters/x/requeue", ""},
	} {
		start := time.Now()
		r := do(t, tc.method, e.url+tc.path, "", tc.body)
		requireError(t, r, http.StatusServiceUnavailable, api.CodeUnavailable)
		// Generous bound (a noisy machine): far below a hang, above the timeout.
		require.Less(t, time.Since(start), 15*time.Second, "%s %s", tc.method, tc.path)
	}
	r = do(t, "GET", e.url+"/healthz", "", "")
	require.Equal(t, "down", r.json["redis"])
	e.srv.Restart()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = do(t, "GET", e.url+"/healthz", "", "")
		if r.status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, r.status, "healthy again once Redis is back: %s", r.body)
}

// TestServeShutdown: Serve answers on its listener and returns nil soon
// after its context is canceled.
func TestServeShutdown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := api.New(srv.Client(), nil, api.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	r := do(t, "POST", "http://"+ln.Addr().String()+"/api/v1/tasks", "", `{"agent":"anything"}`)
	require.Equal(t, http.StatusAccepted, r.status, "no agents configured: any agent accepted: %s", r.body)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after its context was canceled")
	}
	_, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	require.Error(t, err, "the listener is closed")
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	hs := httptest.NewServer(api.New(srv.Client(), nil, api.Options{Token: token}).Handler())
	defer hs.Close()
	r := do(t, "GET", hs.URL+"/api/v1/openapi.yaml", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/yaml", r.header.Get("Content-Type"))
	require.True(t, bytes.Equal(api.OpenAPI(), []byte(r.body)))
}

// TestRedisHangs: a "Redis" that accepts connections and never answers
// gives 503 unavailable within the Redis timeout, not a hang.
func TestRedisHangs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := api.New(rdb, testConfig(), api.Options{RedisTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"POST", "/api/v1/tasks", `{"agent":"tool"}`},
		{"GET", "/api/v1/tasks/x", ""},
		{"GET", "/api/v1/agents", ""},
	} {
		start := time.Now()
		r := do(t, tc.method, hs.URL+tc.path, "", tc.body)
		requireError(t, r, http.StatusServiceUnavailable, api.CodeUnavailable)
		require.Less(t, time.Since(start), 10*time.Second, "%s %s", tc.method, tc.path)
	}
}
