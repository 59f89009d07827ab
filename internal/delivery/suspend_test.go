package delivery

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// TestWaitDelay: a wait's delay is the agent's (sleep, time left, timeout,
// MaxWait for a signal without one), cut to the task's deadline.
func TestWaitDelay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	env := &tasks.Envelope{ID: "t"}
	require.Equal(t, time.Minute, waitDelay(env, agent.Wait{Sleep: time.Minute}, now))
	require.Equal(t, agent.MaxWait, waitDelay(env, agent.Wait{Signal: "a"}, now))
	require.Zero(t, waitDelay(env, agent.Wait{Until: now.Add(-time.Hour)}, now))
	env.Deadline = now.Add(10 * time.Second).UnixMilli()
	require.Equal(t, 10*time.Second, waitDelay(env, agent.Wait{Signal: "a", Timeout: time.Hour}, now), "cut to the deadline")
	env.Deadline = now.Add(-time.Second).UnixMilli()
	require.Zero(t, waitDelay(env, agent.Wait{Sleep: time.Hour}, now), "a deadline passed: due at once")
}

// TestWaitJSON: the record's wait is the wire shape with its kind and due.
func TestWaitJSON(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC)
	require.JSONEq(t, `{"kind":"signal","signal":"approve","timeout":"1h0m0s","due":"2026-11-01T01:00:00Z"}`,
		string(waitJSON(agent.Wait{Signal: "approve", Timeout: time.Hour}, due)))
	require.JSONEq(t, `{"kind":"sleep","sleep":"10m0s","due":"2026-11-01T01:00:00Z"}`,
		string(waitJSON(agent.Wait{Sleep: 10 * time.Minute}, due)))
}

// TestSuspended: a call's suspend is its checked wait and no error; a wait
// refused is logic_error "invalid suspend: …"; other errors pass.
func TestSuspended(t *testing.T) {
	t.Parallel()
	now := time.Now()
	w, err := suspended(agent.Suspend(agent.Wait{Sleep: time.Second}), now)
	require.NoError(t, err)
	require.Equal(t, time.Second, w.Sleep)
	w, err = suspended(agent.Suspend(agent.Wait{}), now)
	require.Nil(t, w)
	var f *resilience.Failure
	require.True(t, errors.As(err, &f))
	require.Equal(t, resilience.LogicError, f.Class)
	require.Contains(t, f.Text, "invalid suspend: ")
	other := errors.New("boom")
	w, err = suspended(other, now)
	require.Nil(t, w)
	require.Same(t, other, err)
}

// TestWaitResult: the agent's view of the record's wait once it ended.
func TestWaitResult(t *testing.T) {
	t.Parallel()
	require.Nil(t, waitResult(record.StartInfo{}))
	raw := json.RawMessage(`{"kind":"signal","signal":"approve","due":"2026-11-01T01:00:00Z"}`)
	require.Nil(t, waitResult(record.StartInfo{Wait: raw}), "still waiting: no outcome yet")
	require.Equal(t, &agent.WaitResult{Kind: "signal", Signal: "approve", TimedOut: true},
		waitResult(record.StartInfo{Wait: raw, WaitOutcome: record.WaitTimeout}))
	require.Equal(t, &agent.WaitResult{Kind: "signal", Signal: "approve"},
		waitResult(record.StartInfo{Wait: raw, WaitOutcome: record.WaitSignal}))
}
