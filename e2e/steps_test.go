package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// stepsProvider is a fake OpenAI-compatible model on loopback that
// counts the calls of each step it received and the tokens it served (100
// a reply). With hold set, the first call of step hold is received
// (counted in calls), announced on held, and never answered: the handler
// waits until the client goes away (cut counts those calls; their tokens
// are not served).
type stepsProvider struct {
	srv    *httptest.Server
	hold   string
	held   chan struct{}
	mu     sync.Mutex
	calls  map[string]int
	cut    int
	tokens int64
}

func newStepsProvider(t *testing.T) *stepsProvider { return newHoldingProvider(t, "") }

func newHoldingProvider(t *testing.T, hold string) *stepsProvider {
	p := &stepsProvider{calls: map[string]int{}, hold: hold, held: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Step string `json:"step"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		p.mu.Lock()
		p.calls[req.Step]++
		first := p.calls[req.Step] == 1
		p.mu.Unlock()
		if first && req.Step == p.hold {
			close(p.held)
			<-r.Context().Done() // the caller died: nothing is answered
			p.mu.Lock()
			p.cut++
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		p.tokens += 100
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"answer of %s"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":70,"completion_tokens":30,"total_tokens":100}}`, req.Step)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *stepsProvider) snapshot() (map[string]int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := map[string]int{}
	for k, v := range p.calls {
		calls[k] = v
	}
	return calls, p.tokens
}

// TestStepsEndToEnd (#37): a real worker process runs an exec agent of 5
// model-call steps against a fake provider; its first attempt records 3
// steps and exits with a retryable error. The retry gets steps 1–3 in its
// ActionRequest and calls the provider for steps 4–5 only: every step was
// served exactly once, and the task's usage is what the provider served.
// Its history has a step event per step, with its usage.
func TestStepsEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	prov := newStepsProvider(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 1m
  retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 50ms, jitter: 0}
agents:
  stepper: {exec: {command: [%q]}}
`, b.agent))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())

	params, _ := json.Marshal(map[string]any{"mode": "steps", "n": 5, "url": prov.srv.URL, "fail_after": 3})
	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(),
		"--agent", "stepper", "--id", "steps-1", "--params", string(params))
	require.Equal(t, 0, code, errOut)

	rdb := srv.Client()
	v := waitStates(t, rdb, []string{"steps-1"}, 60*time.Second)["steps-1"]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	require.Equal(t, 2, v.Attempts, "one failed attempt, one retry")

	calls, served := prov.snapshot()
	require.Equal(t, map[string]int{"s1": 1, "s2": 1, "s3": 1, "s4": 1, "s5": 1}, calls, "every step served exactly once")
	require.Equal(t, int64(500), served)
	require.NotNil(t, v.Usage)
	require.Equal(t, served, v.Usage.TotalTokens, "the task's usage is what the provider served")
	require.Equal(t, 5, v.Steps)

	var result struct {
		Steps  []string `json:"steps"`
		Called int      `json:"called"`
	}
	require.NoError(t, json.Unmarshal(v.Result, &result))
	require.Equal(t, []string{"answer of s1", "answer of s2", "answer of s3", "answer of s4", "answer of s5"}, result.Steps)
	require.Equal(t, 2, result.Called, "the retry called the provider for steps 4 and 5 only")

	var stepEvents []record.Event
	for _, ev := range v.History {
		if ev.Event == record.EventStep {
			stepEvents = append(stepEvents, ev)
		}
	}
	require.Len(t, stepEvents, 5)
	for i, ev := range stepEvents {
		require.Equal(t, fmt.Sprint("s", i+1), ev.Name)
		require.Equal(t, min(i/3, 1)+1, ev.Attempt, "steps 1–3 on attempt 1, 4–5 on attempt 2")
		require.NotNil(t, ev.Usage)
		require.Equal(t, int64(100), ev.Usage.TotalTokens)
	}
	steps, err := record.NewStore(rdb).Steps(context.Background(), "steps-1")
	require.NoError(t, err)
	require.Len(t, steps, 5)
	require.JSONEq(t, `"answer of s4"`, string(steps["s4"]))
}
