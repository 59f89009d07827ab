package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueueRefusesControlCharacters (#23 item 4): a task whose id,
// agent (when the config names no agents), action or correlation_id holds
// a C0/C1 control character or a bidi formatting character, or whose id
// is "." or "..", is 400 invalid_request naming the field, single or in a
// batch (with its index); nothing is enqueued.
func TestEnqueueRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	anyAgent := config.Default() // names no agents: any agent name is accepted
	e := setupCfg(t, anyAgent)
	for _, tc := range []struct {
		name, body, field string
		contains          []string
	}{
		{"id with ESC", `{"id":"a\u001b]0;t\u0007b","agent":"tool"}`, "id", []string{"U+001B"}},
		{"id with newline", `{"id":"a\nb","agent":"tool"}`, "id", []string{"control"}},
		{"id with DEL", `{"id":"a` + "\x7f" + `b","agent":"tool"}`, "id", []string{"U+007F"}},
		{"id with C1", `{"id":"a\u009bb","agent":"tool"}`, "id", []string{"U+009B"}},
		{"id with RLO", `{"id":"a\u202eb","agent":"tool"}`, "id", []string{"U+202E", "bidirectional"}},
		{"id with an isolate", `{"id":"a\u2068b","agent":"tool"}`, "id", []string{"U+2068"}},
		{"id with an RLM", `{"id":"a\u200fb","agent":"tool"}`, "id", []string{"U+200F"}},
		{"id with an ALM", `{"id":"a\u061cb","agent":"tool"}`, "id", []string{"U+061C"}},
		{"id dot", `{"id":".","agent":"tool"}`, "id", []string{`"."`}},
		{"id dot dot", `{"id":"..","agent":"tool"}`, "id", []string{`".."`}},
		{"agent", `{"agent":"to\u001b[2Jol"}`, "agent", nil},
		{"agent with bidi", `{"agent":"to\u2066ol"}`, "agent", nil},
		{"action", `{"agent":"tool","action":"run\u001b[1A\u001b[2K"}`, "action", []string{"U+001B"}},
		{"action with tab", `{"agent":"tool","action":"a\tb"}`, "action", []string{"U+0009"}},
		{"action with C1", `{"agent":"tool","action":"a\u0085b"}`, "action", []string{"U+0085"}},
		{"correlation_id", `{"agent":"tool","correlation_id":"c\u0007"}`, "correlation_id", []string{"U+0007"}},
		{"correlation_id with bidi", `{"agent":"tool","correlation_id":"c\u202ad"}`, "correlation_id", []string{"U+202A"}},
		{"batch", `{"tasks":[{"agent":"tool"},{"agent":"tool","action":"\u001b]0;x\u0007"}]}`, "action", []string{"tasks[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := do(t, "POST", e.url+"/api/v1/tasks", "", tc.body)
			requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, append([]string{`field "` + tc.field + `"`}, tc.contains...)...)
		})
	}
	n, err := e.rdb.Exists(context.Background(), "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.Zero(t, n, "no refused task was enqueued")

	// Printable Unicode is fine.
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"café-✓","agent":"outil","action":"résumé","correlation_id":"日本"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
}

// TestCancelReasonRefused (#23 item 4): a cancel reason with a control or
// bidi character is 400 invalid_request naming "reason"; the task is not
// canceled.
func TestCancelReasonRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"cr1","agent":"tool","in":"1h"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	for _, reason := range []string{`"done\u001b[2J"`, `"a\u202eb"`, `"line\nline"`} {
		r = do(t, "POST", e.url+"/api/v1/tasks/cr1/cancel", "", `{"reason":`+reason+`}`)
		requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `field "reason"`)
	}
	v, err := e.store.Get(context.Background(), "cr1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateScheduled, v.State)
}

// TestEnqueueDelayCap (#23 item 6): "in" at tasks.MaxDelay (10 years) is
// accepted and its record lives at least that long, even with the largest
// retention (the sum saturates instead of wrapping to a negative
// lifetime); "in" past it is 400 naming "in", single or in a batch, and
// nothing is enqueued.
func TestEnqueueDelayCap(t *testing.T) {
	t.Parallel()
	for _, retention := range []time.Duration{time.Hour, durx.Max} {
		cfg := testConfig()
		cfg.History.Retention = retention
		e := setupCfg(t, cfg)
		ctx := context.Background()
		atCap := tasks.MaxDelay.String()
		r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"far","agent":"tool","in":"`+atCap+`"}`)
		require.Equal(t, http.StatusAccepted, r.status, r.body)
		require.Equal(t, "scheduled", r.json["state"])
		for _, key := range []string{rkeys.Task("far"), rkeys.TaskHistory("far")} {
			// In seconds, as Redis answers: go-redis's TTL would overflow
			// a time.Duration for the largest retention.
			secs, err := e.rdb.Do(ctx, "TTL", key).Int64()
			require.NoError(t, err)
			require.GreaterOrEqual(t, secs, int64(tasks.MaxDelay/time.Second), "%s (retention %s) outlives its delay", key, retention)
		}
		r = do(t, "GET", e.url+"/api/v1/tasks/far", "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.Equal(t, "scheduled", r.json["state"])

		above := (tasks.MaxDelay + time.Second).String()
		for _, body := range []string{
			`{"id":"too-far","agent":"tool","in":"` + above + `"}`,
			`{"id":"too-far","agent":"tool","in":"2561900h"}`,
			`{"tasks":[{"agent":"tool"},{"id":"too-far","agent":"tool","in":"2561900h"}]}`,
		} {
			r = do(t, "POST", e.url+"/api/v1/tasks", "", body)
			requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `field "in"`, "too large")
		}
		n, err := e.rdb.Exists(ctx, rkeys.Task("too-far"), "asynq:{default}:pending").Result()
		require.NoError(t, err)
		require.Zero(t, n)
	}
}
