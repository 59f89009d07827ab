package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/worker"
)

// TestAgentInvalidUTF8 (#35 item 4): a real exec agent writes raw 0xFF
// 0xFE inside the JSON strings of its result and of an events-fd line,
// a real worker runs it on a real redis-server; the task's JSON from
// GET /api/v1/tasks/{id}, its event stream and its webhook body are
// valid UTF-8, the invalid bytes replaced by U+FFFD.
func TestAgentInvalidUTF8(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "github.com/agentq/agentq/internal/testagent")
	srv := redistest.Start(t)
	agents := fmt.Sprintf("agents:\n  bad: {exec: {command: [%q, bad_utf8]}}\n", bin)
	parse := func(extra string) *config.Config {
		cfg, err := config.Parse([]byte(fmt.Sprintf("redis: {url: %q}\nworker: {concurrency: 1, shutdown_timeout: 2s}\n%s%s",
			srv.URL(), agents, extra)), "test.yaml")
		require.NoError(t, err)
		return cfg
	}
	// The API knows the webhook (to accept "notify"); the test delivers
	// it with a deliverer of its own (the worker's would read its secret
	// from the environment).
	apiCfg := parse("webhooks:\n  results: {url: 'http://127.0.0.1:1/', secret: '${UTF8_TEST_SECRET}'}\n")
	s := api.New(srv.Client(), apiCfg, api.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)

	w, err := worker.New(parse(""), srv.Client(), worker.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	bodies := make(chan []byte, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
	}))
	t.Cleanup(rcv.Close)
	hooks := webhook.New(srv.Client(), record.NewStore(srv.Client()), webhook.Options{
		Hooks:  map[string]webhook.Hook{"results": {Name: "results", URL: rcv.URL, Key: make([]byte, 32)}},
		Logger: slog.New(slog.DiscardHandler), Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	go func() { defer wg.Done(); _ = hooks.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	r := do(t, "POST", hs.URL+"/api/v1/tasks", "", `{"id":"bad-1","agent":"bad","params":{},"notify":["results"]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "GET", hs.URL+"/api/v1/tasks/bad-1?wait=20s", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "succeeded", r.json["state"], r.body)
	require.True(t, utf8.ValidString(r.body), "task JSON: %q", r.body)
	require.Equal(t, map[string]any{"text": "a\uFFFDb"}, r.json["result"], r.body)

	// The event stream: it ends after the terminal event.
	resp, err := http.Get(hs.URL + "/api/v1/tasks/bad-1/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	var stream strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		stream.WriteString(sc.Text() + "\n")
	}
	require.True(t, utf8.ValidString(stream.String()), "event stream: %q", stream.String())
	require.Contains(t, stream.String(), `{"text":"a`+"\uFFFD"+`b"}`, "the agent's output event, replaced")

	// Every delivery's body is valid; the result's comes with U+FFFD.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case b := <-bodies:
			require.True(t, utf8.Valid(b), "webhook body: %q", b)
			if strings.Contains(string(b), "a\uFFFDb") {
				return
			}
		case <-deadline:
			t.Fatal("no webhook with the result delivered")
		}
	}
}
