package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// sse is one event of an event stream.
type sse struct {
	id, event, data string
}

// readSSE reads body's events into out until the stream ends or stop
// says so (after handing it the event); comments are skipped.
func readSSE(body io.Reader, each func(sse) (stop bool)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 4096), 2<<20)
	var ev sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" && each(ev) {
				return nil
			}
			ev = sse{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	return sc.Err()
}

func getStream(t *testing.T, url, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// TestWaitAndStreamEndToEnd: a worker and `enqueuer serve` as real
// processes on a real redis-server. GET ?wait=50s answers when the task's
// terminal event is written (moments after it, not at the timeout), with
// its result; `enqueuer --wait` prints a result (exit 0) and a dead
// letter's failure (exit 4). An event stream read until its first retry,
// dropped, and resumed with Last-Event-ID from another serve process (the
// first one stopped) gets every later event once, in order, ending with
// the terminal one: together the two connections saw exactly the task's
// events.
func TestWaitAndStreamEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
  retry: {max_attempts: 5, initial_backoff: 700ms, max_backoff: 700ms, jitter: 0}
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, b.agent))
	addr := freeAddr(t)
	base := "http://" + addr
	serve := start(t, "serve", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	waitHTTP(t, base+"/healthz", 20*time.Second)
	post := func(body string) {
		resp, err := http.Post(base+"/api/v1/tasks", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}

	// A wait answers at the terminal write.
	post(`{"id":"wait-1","agent":"tool","params":{"mode":"sleep","ms":1500}}`)
	begin := time.Now()
	resp, err := http.Get(base + "/api/v1/tasks/wait-1?wait=50s")
	require.NoError(t, err)
	told := time.Now()
	var v tasks.View
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	_ = resp.Body.Close()
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.JSONEq(t, `{"slept_ms":1500}`, string(v.Result))
	end := v.History[len(v.History)-1]
	require.Equal(t, "succeeded", end.Event)
	lag := told.Sub(end.At)
	t.Logf("wait: told %s after the terminal write (waited %s)", lag, told.Sub(begin))
	require.Less(t, lag, 5*time.Second, "told at the terminal write")
	require.Less(t, told.Sub(begin), 40*time.Second, "not at the timeout")

	// enqueuer --wait: a result, then a failure.
	out, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--params", `{"mode":"sleep","ms":200}`, "--wait", "--wait-timeout", "60s")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"slept_ms":200}`, out)
	out, errOut, code = run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--params", `{"mode":"error","code":400,"error":"bad input"}`, "--wait", "--wait-timeout", "60s")
	require.Equal(t, 4, code, "stdout %s stderr %s", out, errOut)
	require.Contains(t, errOut, "dead_lettered")
	require.Contains(t, errOut, "bad input")

	// A stream dropped mid-task and resumed from another serve process.
	post(`{"id":"stream-1","agent":"tool","params":{"mode":"fail_then_succeed","times":3,"state_dir":"` + t.TempDir() + `"}}`)
	resp = getStream(t, base+"/api/v1/tasks/stream-1/events", "")
	var first []sse
	require.NoError(t, readSSE(resp.Body, func(ev sse) bool {
		first = append(first, ev)
		return ev.event == "retrying"
	}))
	_ = resp.Body.Close() // disconnected mid-task
	require.Equal(t, "retrying", first[len(first)-1].event)
	require.Equal(t, 0, serve.stop(t, 15*time.Second))
	addr2 := freeAddr(t)
	start(t, "serve2", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr2)
	waitHTTP(t, "http://"+addr2+"/healthz", 20*time.Second)
	resp = getStream(t, "http://"+addr2+"/api/v1/tasks/stream-1/events", first[len(first)-1].id)
	var rest []sse
	require.NoError(t, readSSE(resp.Body, func(ev sse) bool { rest = append(rest, ev); return false }))
	_ = resp.Body.Close()
	all := append(first, rest...)
	require.Equal(t, "succeeded", all[len(all)-1].event, "the stream ends with the terminal event")
	evs, _, err := record.StoreOf(tasks.NewStore(rdb)).Events(context.Background(), "stream-1", 0)
	require.NoError(t, err)
	require.Len(t, all, len(evs), "every event once")
	for i, ev := range all {
		require.Equal(t, fmt.Sprint(evs[i].Seq), ev.id, "in order, none lost or repeated")
		require.Equal(t, evs[i].Event, ev.event)
		require.JSONEq(t, string(evs[i].Marshal()), ev.data)
	}
	require.GreaterOrEqual(t, len(rest), 2, "the resumed stream carried the rest of the task")
}
