package e2e

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

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
)

// TestLiveOutputEndToEnd (#26): a real worker process runs an exec agent
// (under its procgroup guard) that writes progress lines to
// AGENTQ_EVENTS_FD, and an HTTP agent whose backend streams an Anthropic
// message. The exec agent's first progress is in the task's events
// while it still runs (it waits for the test's signal); every event is
// numbered with the history and precedes the success; the HTTP agent's
// events are relayed and its result is the assembled message.
func TestLiveOutputEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	frames := []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"streamed "}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"answer"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range frames {
			_, _ = fmt.Fprintf(w, "%s\n\n", f)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(backend.Close)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults: {timeout: 2m}
agents:
  tool: {exec: {command: [%q]}}
  llm: {http: {url: %q, body: params}}
`, b.agent, backend.URL))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	wait := filepath.Join(t.TempDir(), "go")
	params, _ := json.Marshal(map[string]any{"mode": "events", "before": 1, "wait_file": wait, "after": 2})
	for _, args := range [][]string{
		{"--agent", "tool", "--id", "live-tool", "--params", string(params)},
		{"--agent", "llm", "--id", "live-llm", "--params", `{"stream":true}`},
	} {
		_, errOut, code := run(t, "", b.enqueuer, append([]string{"--config", cfg, "--redis", srv.URL()}, args...)...)
		require.Equal(t, 0, code, errOut)
	}

	rec := record.NewStore(srv.Client())
	ctx := context.Background()
	events := func(id string) ([]record.Event, record.State) {
		evs, st, err := rec.Events(ctx, id, 0)
		require.NoError(t, err)
		for i, ev := range evs {
			require.Equal(t, int64(i+1), ev.Seq, "%s: events numbered 1, 2, …", id)
		}
		return evs, st
	}
	count := func(evs []record.Event, name string) int {
		n := 0
		for _, ev := range evs {
			if ev.Event == name {
				n++
			}
		}
		return n
	}
	poll(t, 60*time.Second, "the exec agent's first progress", func() bool {
		evs, st := events("live-tool")
		if count(evs, record.EventProgress) == 0 {
			return false
		}
		require.NotEqual(t, record.StateSucceeded, st, "the agent waits for the test's signal")
		return true
	})
	require.NoError(t, os.WriteFile(wait, nil, 0o644))

	for _, id := range []string{"live-tool", "live-llm"} {
		poll(t, 60*time.Second, id+" to succeed", func() bool {
			_, st := events(id)
			return st == record.StateSucceeded
		})
	}
	evs, _ := events("live-tool")
	var progress []string
	for _, ev := range evs {
		if ev.Event == record.EventProgress {
			progress = append(progress, string(ev.Data))
		}
	}
	require.Equal(t, []string{`{"step":1}`, `{"step":2}`, `{"step":3}`}, progress)
	require.Equal(t, record.EventSucceeded, evs[len(evs)-1].Event)

	evs, _ = events("live-llm")
	require.Equal(t, len(frames), count(evs, record.EventOutput))
	first := evs[0]
	for _, ev := range evs {
		if ev.Event == record.EventOutput {
			first = ev
			break
		}
	}
	require.True(t, strings.Contains(string(first.Data), `"message_start"`), "%s", first.Data)
	v, err := rec.Get(ctx, "live-llm")
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"msg_e2e","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"streamed answer"}],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`, string(v.Result))
}
