package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
)

// events collects the events a call emits.
type events struct {
	mu    sync.Mutex
	got   []string // "type data"
	first chan struct{}
	once  sync.Once
}

func newEvents() *events { return &events{first: make(chan struct{})} }

func (e *events) emit(typ string, data json.RawMessage) {
	e.mu.Lock()
	e.got = append(e.got, typ+" "+string(data))
	e.mu.Unlock()
	e.once.Do(func() { close(e.first) })
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// TestExecEventsLive: an exec agent's events reach Emit while it runs
// (the agent waits for the test to see its first event before it goes
// on), in order; lines that are not events are dropped, a line over the
// cap becomes a note, blanks inside a line are compacted.
func TestExecEventsLive(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	wait := filepath.Join(t.TempDir(), "go")
	params, _ := json.Marshal(map[string]any{
		"mode": "events",
		"lines": []string{
			`{"type": "output", "data": {"text": "hi"}}`,
			`not json`,
			`{"type":"other","data":1}`,
			`{"type":"progress"}`,
		},
		"before": 1, "wait_file": wait, "after": 2, "big": agent.MaxEventData + 2048,
	})
	got := newEvents()
	r := req("t-events", string(params))
	r.Emit = got.emit
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type result struct {
		data json.RawMessage
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := e.Run(ctx, r)
		done <- result{data, err}
	}()
	select {
	case <-got.first:
	case res := <-done:
		t.Fatalf("the call ended (%s, %v) before its first event was seen", res.data, res.err)
	}
	require.Equal(t, []string{`output {"text":"hi"}`}, got.list()[:1], "the first event, while the agent runs")
	require.NoError(t, os.WriteFile(wait, nil, 0o644))
	res := <-done
	require.NoError(t, res.err)
	require.JSONEq(t, `{"events":3}`, string(res.data))
	require.Equal(t, []string{
		`output {"text":"hi"}`,
		`progress null`,
		`progress {"step":1}`,
		`progress {"step":2}`,
		`progress {"step":3}`,
		fmt.Sprintf(`output {"truncated":true,"bytes":%d}`, agent.MaxEventData+2048+len(`{"type":"output","data":""}`)+1),
	}, got.list())
}

// TestExecEventsNeverBlockTheAgent: an agent writing far more than a
// pipe holds (64 KiB) is never blocked: the pipe is drained while it
// runs, and every event arrives in order.
func TestExecEventsNeverBlockTheAgent(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	got := newEvents()
	r := req("t-many", `{"mode":"events","before":5000}`)
	r.Emit = got.emit
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := e.Run(ctx, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"events":5000}`, string(data))
	list := got.list()
	require.Len(t, list, 5000)
	for i, ev := range list {
		require.Equal(t, fmt.Sprintf(`progress {"step":%d}`, i+1), ev)
	}
}

// TestExecEventsSlowDrainLosesNothing: a drain slower than the agent
// (a loaded machine: here each event takes 300 µs to report) still reads
// every event the agent wrote before it ended: at its end the pipe and
// the drain's buffer hold about 130 KB, 3,000 events, more than 200 ms of
// work. The pipe used to be cut 200 ms after the agent's end whatever
// was still in it.
func TestExecEventsSlowDrainLosesNothing(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	got := newEvents()
	r := req("t-slow", `{"mode":"events","before":5000}`)
	r.Emit = func(typ string, data json.RawMessage) {
		time.Sleep(300 * time.Microsecond) // the slow consumer this test is about
		got.emit(typ, data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := e.Run(ctx, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"events":5000}`, string(data))
	require.Equal(t, 5000, len(got.list()), "every event written before the agent ended is reported")
}

// TestExecWithoutEmit: a call without Emit gives the agent no events
// descriptor (existing agents are untouched).
func TestExecWithoutEmit(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	data, err := e.Run(context.Background(), req("t-env", `{"mode":"env"}`))
	require.NoError(t, err)
	require.NotContains(t, string(data), agent.EventsFDEnv)

	got := newEvents()
	r := req("t-env2", `{"mode":"env"}`)
	r.Emit = got.emit
	data, err = e.Run(context.Background(), r)
	require.NoError(t, err)
	require.Contains(t, string(data), `"`+agent.EventsFDEnv+`":"3"`)
	require.Empty(t, got.list())
	_, err = e.Run(context.Background(), req("t-none", `{"mode":"events"}`))
	require.Error(t, err, "no descriptor without Emit")
	require.True(t, strings.Contains(err.Error(), "AGENTQ_EVENTS_FD") || strings.Contains(err.Error(), "exit"), "%v", err)
}
