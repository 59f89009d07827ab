package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueuerFailIfUnavailable: with the agent's breaker open,
// --fail-if-unavailable (or a line's "fail_if_unavailable": true) exits 3,
// names the agent and when its breaker may reopen, and enqueues nothing.
func TestEnqueuerFailIfUnavailable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, breaker.New(rdb).Trip(ctx, "llm.example", 10*time.Minute))
	cfgPath := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("agents:\n  llm: {breaker_key: llm.example}\n  tool: {}\n"), 0o600))
	store := tasks.NewStore(rdb)
	exists := func(id string) bool {
		ok, err := store.Exists(ctx, id)
		require.NoError(t, err)
		return ok
	}
	base := []string{"--redis", srv.URL(), "--config", cfgPath}

	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		code     int
		outHas   []string
		errHas   []string
		enqueued []string
		absent   []string
	}{
		{name: "single refused", args: []string{"--agent", "llm", "--id", "s1", "--fail-if-unavailable"},
			code: ExitUnavailable, errHas: []string{`agent "llm" is unavailable`, `"llm.example"`, "open until 20"}, absent: []string{"s1"}},
		{name: "single refused json", args: []string{"--agent", "llm", "--id", "s2", "--fail-if-unavailable", "--json"},
			code: ExitUnavailable, outHas: []string{`"code":"agent_unavailable"`, `"agent":"llm"`, `"open_until":"20`}, absent: []string{"s2"}},
		{name: "single without the flag is queued", args: []string{"--agent", "llm", "--id", "s3"},
			code: ExitOK, outHas: []string{"s3"}, enqueued: []string{"s3"}},
		{name: "closed breaker passes", args: []string{"--agent", "tool", "--id", "s4", "--fail-if-unavailable"},
			code: ExitOK, outHas: []string{"s4"}, enqueued: []string{"s4"}},
		{name: "file line refused", args: []string{"--file", "-"},
			stdin: `{"id":"f1","agent":"tool"}` + "\n" + `{"id":"f2","agent":"llm","fail_if_unavailable":true}` + "\n",
			code:  ExitUnavailable, errHas: []string{"line 2:", `agent "llm" is unavailable`, "nothing was enqueued"}, absent: []string{"f1", "f2"}},
		{name: "file flag applies to all lines", args: []string{"--file", "-", "--fail-if-unavailable", "--json"},
			stdin: `{"id":"f3","agent":"llm"}` + "\n" + `{"id":"f4","agent":"tool"}` + "\n",
			code:  ExitUnavailable, outHas: []string{`"code":"agent_unavailable"`}, errHas: []string{"line 1:"}, absent: []string{"f3", "f4"}},
		{name: "file without fail-fast is queued", args: []string{"--file", "-"},
			stdin: `{"id":"f5","agent":"llm"}` + "\n" + `{"id":"f6","agent":"tool","fail_if_unavailable":true}` + "\n",
			code:  ExitOK, enqueued: []string{"f5", "f6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append(base, tc.args...)...)
			require.Equal(t, tc.code, code, "stdout %s stderr %s", out, errOut)
			for _, s := range tc.outHas {
				require.Contains(t, out, s)
			}
			for _, s := range tc.errHas {
				require.Contains(t, errOut, s)
			}
			for _, id := range tc.enqueued {
				require.True(t, exists(id), id)
			}
			for _, id := range tc.absent {
				require.False(t, exists(id), id)
			}
			if strings.Contains(out, "agent_unavailable") {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[0]), &m))
				until, err := time.Parse(time.RFC3339Nano, m["open_until"].(string))
				require.NoError(t, err)
				require.True(t, until.After(time.Now()))
			}
		})
	}
}

// TestEnqueuerServe: `enqueuer serve` answers on --http and stops when its
// context is canceled; a bad --max-body is bad usage.
func TestEnqueuerServe(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	_, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", srv.URL(), "serve", "--max-body", "0")
	require.Equal(t, ExitUsage, code, errOut)

	addr := freeLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb syncBuffer
	go func() {
		app := &App{Out: &errb, Err: &errb, In: strings.NewReader(""), Getenv: func(string) string { return "" }}
		done <- Main(ctx, app, NewEnqueuerCmd, []string{"--redis", srv.URL(), "serve", "--http", addr})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := httpGet("http://" + addr + "/healthz")
		if err == nil && resp == 200 {
			break
		}
		require.True(t, time.Now().Before(deadline), "serve did not answer: %s", errb.String())
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was canceled")
	}
	require.Contains(t, errb.String(), "HTTP API listening")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func httpGet(url string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
