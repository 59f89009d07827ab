package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

var now = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// TestParseWait: every wire shape of a wait is read (durations as strings
// or seconds), and a wait that is none, two, out of bounds or malformed
// is refused with a text starting "invalid suspend: ".
func TestParseWait(t *testing.T) {
	t.Parallel()
	good := map[string]agent.Wait{
		`{"sleep":"10m"}`:                     {Sleep: 10 * time.Minute},
		`{"sleep":90}`:                        {Sleep: 90 * time.Second},
		`{"until":"2026-12-01T00:00:00Z"}`:    {Until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		`{"signal":"approve","timeout":"1h"}`: {Signal: "approve", Timeout: time.Hour},
		`{"signal":"a.b:c_d-1"}`:              {Signal: "a.b:c_d-1"},
		`{"until":"2020-01-01T00:00:00Z"}`:    {Until: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
		// What the Python and TypeScript helpers send: an enqueue body's task with name.
		`{"children":[{"agent":"x","name":"a","deadline":"60s","max_tokens":5,"params":{"k":1},"correlation_id":"c"}],"mode":"any","timeout":60}`: {
			Children: []agent.Child{{Agent: "x", Name: "a", Deadline: "60s", MaxTokens: 5, Params: json.RawMessage(`{"k":1}`), CorrelationID: "c"}},
			Mode:     "any", Timeout: time.Minute},
	}
	for raw, want := range good {
		w, err := agent.ParseWait(json.RawMessage(raw), now)
		require.NoError(t, err, raw)
		require.Equal(t, want, w, raw)
		back, err := json.Marshal(w)
		require.NoError(t, err)
		again, err := agent.ParseWait(back, now)
		require.NoError(t, err)
		require.Equal(t, want, again, "MarshalJSON writes the wire shape: %s", back)
	}
	bad := map[string]string{
		``:                                       "no wait",
		`{}`:                                     "names nothing",
		`{"sleep":"1m","signal":"a"}`:            "more than one",
		`{"sleep":"forever"}`:                    "not a duration",
		`{"sleep":"9000h"}`:                      "not between",
		`{"sleep":-1}`:                           "neither",
		`{"until":"tomorrow"}`:                   "RFC 3339",
		`{"until":"2030-01-01T00:00:00Z"}`:       "ahead",
		`{"signal":"a b"}`:                       "character",
		`{"signal":"a","timeout":"9000h"}`:       "timeout",
		`{"sleep":"1m","timeout":"1m"}`:          "a timeout goes with",
		`{"children":[{"agent":"x","in":"1m"}]}`: "child 1: in is not supported",
		`{"children":[{"agent":"x","fail_if_unavailable":true}]}`: "fail_if_unavailable",
		`{"sleep":"1m","mode":"any"}`:                             "a mode goes with a children wait",
		`{"children":[{"agent":"x","bogus":1}]}`:                  "not a wait object",
		`{"children":[],"mode":"some"}`:                           "mode",
		`{"sleeep":"1m"}`:                                         "not a wait object",
		`[1]`:                                                     "invalid suspend",
	}
	for raw, want := range bad {
		_, err := agent.ParseWait(json.RawMessage(raw), now)
		require.ErrorIs(t, err, agent.ErrInvalidSuspend, raw)
		require.True(t, strings.HasPrefix(err.Error(), "invalid suspend: "), err.Error())
		require.Contains(t, err.Error(), want, raw)
	}
}

// TestWaitDelay: a sleep's, a time's (0 once past), a signal's timeout
// (MaxWait without one).
func TestWaitDelay(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Minute, agent.Wait{Sleep: time.Minute}.Delay(now))
	require.Equal(t, time.Hour, agent.Wait{Until: now.Add(time.Hour)}.Delay(now))
	require.Zero(t, agent.Wait{Until: now.Add(-time.Hour)}.Delay(now))
	require.Equal(t, 5*time.Second, agent.Wait{Signal: "a", Timeout: 5 * time.Second}.Delay(now))
	require.Equal(t, agent.MaxWait, agent.Wait{Signal: "a"}.Delay(now))
	require.Equal(t, agent.WaitSignal, agent.Wait{Signal: "a"}.Kind())
	require.Equal(t, "", agent.Wait{Signal: "a", Sleep: 1}.Kind())
}

// TestSuspendGo: a Go agent's Suspend is a *SuspendError carrying the wait.
func TestSuspendGo(t *testing.T) {
	t.Parallel()
	err := agent.Suspend(agent.Wait{Signal: "approve"})
	var se *agent.SuspendError
	require.True(t, errors.As(err, &se))
	require.Equal(t, "approve", se.Wait.Signal)
	require.Contains(t, err.Error(), `"signal":"approve"`)
}

// TestExecSuspend: an exec agent's suspend reply is a *SuspendError with
// its wait and usage; a bad wait is logic_error.
func TestExecSuspend(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	run := func(stdout string) (json.RawMessage, error) {
		params, _ := json.Marshal(map[string]any{"mode": "exit", "code": 0, "stdout": stdout})
		return e.Run(context.Background(), req("t1", string(params)))
	}
	_, err := run(`{"status":"suspend","wait":{"sleep":"2s"},"usage":{"total_tokens":7}}`)
	var se *agent.SuspendError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, 2*time.Second, se.Wait.Sleep)
	require.JSONEq(t, `{"total_tokens":7}`, string(se.Usage))

	_, err = run(`{"status":"suspend","wait":{"sleep":"2s","signal":"x"}}`)
	f := requireFailure(t, err)
	require.Equal(t, resilience.LogicError, f.Class)
	require.True(t, strings.HasPrefix(f.Text, "invalid suspend: "), f.Text)
}

// TestHTTPSuspend: an HTTP agent's 2xx suspend body is a *SuspendError;
// a body that merely mentions "suspend" is a result.
func TestHTTPSuspend(t *testing.T) {
	t.Parallel()
	for body, suspends := range map[string]bool{
		`{"status":"suspend","wait":{"signal":"approve","timeout":60}}`: true,
		`{"status":"done","note":"suspend"}`:                            false,
		`"suspend"`:                                                     false,
	} {
		srv, _ := server(t, reply(200, nil, body))
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL})
		require.NoError(t, err)
		data, err := h.Run(context.Background(), req("t1", `{}`))
		var se *agent.SuspendError
		require.Equal(t, suspends, errors.As(err, &se), body)
		if suspends {
			require.Equal(t, agent.Wait{Signal: "approve", Timeout: time.Minute}, se.Wait)
		} else {
			require.NoError(t, err)
			require.JSONEq(t, body, string(data))
		}
	}
}

// TestRequestCarriesResume: a resumed run's Request has resume, wait and
// signals in its JSON.
func TestRequestCarriesResume(t *testing.T) {
	t.Parallel()
	srv, s := server(t, reply(200, nil, `1`))
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	r := req("t1", `{}`)
	r.Resume, r.Wait = 2, &agent.WaitResult{Kind: "signal", Signal: "approve"}
	r.Signals = map[string]json.RawMessage{"approve": json.RawMessage(`{"ok":true}`)}
	_, err = h.Run(context.Background(), r)
	require.NoError(t, err)
	_, _, body := s.get()
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &got))
	require.JSONEq(t, `2`, string(got["resume"]))
	require.JSONEq(t, `{"kind":"signal","signal":"approve","timed_out":false}`, string(got["wait"]))
	require.JSONEq(t, `{"approve":{"ok":true}}`, string(got["signals"]))
}
