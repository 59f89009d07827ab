package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/tasks"
)

// eventNames lists events as "seq name data" (data only for output).
func eventNames(evs []record.Event) []string {
	var out []string
	for _, ev := range evs {
		s := fmt.Sprintf("%d %s", ev.Seq, ev.Event)
		if len(ev.Data) > 0 {
			s += " " + string(ev.Data)
		}
		out = append(out, s)
	}
	return out
}

// requireSeqs checks that evs are numbered 1, 2, 3, … in order.
func requireSeqs(t *testing.T, evs []record.Event) {
	t.Helper()
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq, "events %v", eventNames(evs))
	}
}

// waitEvents polls the task's events until cond holds of them.
func waitEvents(t *testing.T, rec *record.Store, id string, cond func([]record.Event) bool) []record.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, _, err := rec.Events(context.Background(), id, 0)
		require.NoError(t, err)
		if cond(evs) {
			return evs
		}
		require.True(t, time.Now().Before(deadline), "events of %s: %v", id, eventNames(evs))
		time.Sleep(5 * time.Millisecond)
	}
}

func countEvent(evs []record.Event, name string) int {
	n := 0
	for _, ev := range evs {
		if ev.Event == name {
			n++
		}
	}
	return n
}

// TestLiveOutputExec (#26): an exec agent (a real subprocess) writes
// progress lines to AGENTQ_EVENTS_FD while it runs: the first ones are
// in the task's events, with their seq, while the agent still waits for
// the test's signal; once it ends, all of them precede the success, in
// order, numbered with the history.
func TestLiveOutputExec(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "github.com/agentq/agentq/internal/testagent")
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 2s}
defaults: {timeout: 60s}
agents:
  prog: {exec: {command: [%q, events]}}
`, bin))
	rec := record.NewStore(rdb)
	wait := filepath.Join(t.TempDir(), "go")
	params, _ := json.Marshal(map[string]any{"before": 2, "wait_file": wait, "after": 2,
		"lines": []string{"not an event"}})
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "live-exec", Agent: "prog", Params: params})
	require.NoError(t, err)

	evs := waitEvents(t, rec, "live-exec", func(evs []record.Event) bool { return countEvent(evs, record.EventProgress) >= 2 })
	_, st, err := rec.Events(context.Background(), "live-exec", 0)
	require.NoError(t, err)
	require.False(t, st == record.StateSucceeded, "the agent waits for the test: the progress came while it ran")
	requireSeqs(t, evs)
	require.Equal(t, record.EventQueued, evs[0].Event)

	require.NoError(t, os.WriteFile(wait, nil, 0o644))
	evs = waitEvents(t, rec, "live-exec", func(evs []record.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Terminal()
	})
	requireSeqs(t, evs)
	var progress []string
	for _, ev := range evs {
		if ev.Event == record.EventProgress {
			progress = append(progress, string(ev.Data))
		}
	}
	require.Equal(t, []string{`{"step":1}`, `{"step":2}`, `{"step":3}`, `{"step":4}`}, progress)
	require.Equal(t, record.EventSucceeded, evs[len(evs)-1].Event, "%v", eventNames(evs))
	for _, ev := range evs {
		if ev.Event == record.EventProgress {
			require.Equal(t, 1, ev.Attempt, "a progress event names the attempt that sent it (as the attempt's outcome does)")
		}
	}
	require.Equal(t, record.EventProgress, evs[len(evs)-2].Event, "the output precedes the outcome: %v", eventNames(evs))
}

// TestLiveOutputHTTP (#26): an HTTP agent whose backend streams an
// OpenAI chat completion: each chunk is an output event of the task,
// and the task's result is the assembled non-streaming completion.
func TestLiveOutputHTTP(t *testing.T) {
	t.Parallel()
	chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	frames := []string{
		fmt.Sprintf(chunk, `{"role":"assistant","content":"Hel"}`, `null`),
		fmt.Sprintf(chunk, `{"content":"lo"}`, `null`),
		fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}`, `null`),
		fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, `null`),
		fmt.Sprintf(chunk, `{}`, `"tool_calls"`),
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		`[DONE]`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range frames {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", f)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 2s}
agents:
  llm: {http: {url: %q, body: params}}
`, srv.URL))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "live-http", Agent: "llm", Params: json.RawMessage(`{"stream":true}`)})
	require.NoError(t, err)
	v := waitState(t, rdb, "live-http", 30*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })
	require.JSONEq(t, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
		"message":{"role":"assistant","content":"Hello","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
		"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, string(v.Result))

	evs, _, err := record.NewStore(rdb).Events(context.Background(), "live-http", 0)
	require.NoError(t, err)
	requireSeqs(t, evs)
	var outs []string
	for _, ev := range evs {
		if ev.Event == record.EventOutput {
			outs = append(outs, string(ev.Data))
		}
	}
	want := make([]string, len(frames))
	for i, f := range frames {
		want[i] = f
	}
	want[len(want)-1] = `"[DONE]"`
	require.Equal(t, want, outs)
}

// TestLiveOutputCaps (#26): a Go-function agent that emits 1500 events:
// the task keeps 1000 and one output_truncated marker, and still
// succeeds; a task whose agent emits nothing has no output at all.
func TestLiveOutputCaps(t *testing.T) {
	t.Parallel()
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
agents:
  flood: {}
  quiet: {}
`, WithAgent("flood", agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		for i := range 1500 {
			require.NoError(t, req.EmitJSON(agent.EventOutput, map[string]int{"i": i}))
		}
		return json.RawMessage(`"done"`), nil
	})), WithAgent("quiet", agent.Func(func(ctx context.Context, req agent.Request) (json.RawMessage, error) {
		return json.RawMessage(`"shh"`), nil
	})))
	c := tasks.NewClient(rdb)
	for _, id := range []string{"flood-1", "quiet-1"} {
		_, err := c.Enqueue(context.Background(), tasks.Task{ID: id, Agent: strings.TrimSuffix(id, "-1")})
		require.NoError(t, err)
	}
	for _, id := range []string{"flood-1", "quiet-1"} {
		waitState(t, rdb, id, 30*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })
	}
	evs, _, err := record.NewStore(rdb).Events(context.Background(), "flood-1", 0)
	require.NoError(t, err)
	requireSeqs(t, evs)
	require.Equal(t, record.MaxOutputEvents, countEvent(evs, record.EventOutput))
	require.Equal(t, 1, countEvent(evs, record.EventOutputTruncated))
	i := 0
	for _, ev := range evs {
		if ev.Event == record.EventOutput {
			require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(ev.Data))
			i++
		}
	}
	n, err := rdb.Exists(context.Background(), rkeys.TaskOutput("quiet-1")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a task that emits nothing has no output list")
}
