package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// fbBackend is an HTTP agent backend on loopback that answers 500 while
// down and 200 while up, and records the agent named in each request.
type fbBackend struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	reqs map[string]int // task id -> calls
	who  map[string]int // request "agent" field -> calls
}

func newFBBackend(t *testing.T) *fbBackend {
	b := &fbBackend{reqs: map[string]int{}, who: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TaskID string `json:"task_id"`
			Agent  string `json:"agent"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		b.mu.Lock()
		b.reqs[req.TaskID]++
		b.who[req.Agent]++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if b.down.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"internal error","type":"server_error"}}`)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"task":%q}`, req.TaskID)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fbBackend) agents() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.who {
		out[k] = v
	}
	return out
}

// TestFallbackEndToEnd: the primary's backend is down; every task is
// served by the fallback agent; the history shows the switch (agent
// fields); the primary's breaker opens (later tasks go straight to the
// fallback) while the fallback's stays closed.
func TestFallbackEndToEnd(t *testing.T) {
	t.Parallel()
	const nTasks = 12
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	primary, backup := newFBBackend(t), newFBBackend(t)
	primary.down.Store(true)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 5s
  retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 100ms}
agents:
  llm:
    http: {url: %q}
    breaker_key: llm.primary
    fallback: [llm_backup]
    circuit_breaker: {failure_threshold: 2, cooldown: 5m}
  llm_backup:
    http: {url: %q}
    breaker_key: llm.backup
`, primary.srv.URL+"/v1/chat", backup.srv.URL+"/v1/chat"))
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)

	var lines, ids []string
	for i := range nTasks {
		id := fmt.Sprintf("fb-%02d", i)
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","action":"chat","params":{"n":%d}}`, id, i))
	}
	_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)
	views := waitStates(t, rdb, ids, 40*time.Second)

	switched := ""
	for _, id := range ids {
		v := views[id]
		require.Equal(t, tasks.StateSucceeded, v.State, id)
		last := v.History[len(v.History)-1]
		require.Equal(t, tasks.EventSucceeded, last.Event, id)
		require.Equal(t, "llm_backup", last.Agent, "%s: served by the fallback", id)
		for _, ev := range v.History {
			if ev.Event == tasks.EventFailed && ev.Agent == "llm" {
				require.Equal(t, string(resilience.ProviderError), ev.ErrorClass, id)
				switched = id
			}
		}
	}
	require.NotEmpty(t, switched, "some task must have tried the primary before its breaker opened")
	require.LessOrEqual(t, primary.agents()["llm"], 2+2, "the primary's breaker opens after 2 failures (plus calls in flight)")
	require.Equal(t, map[string]int{"llm_backup": nTasks}, backup.agents(), "the fallback is called under its own name")

	// The inspector shows the switch in the task's history.
	out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "task", switched, "--json")
	require.Equal(t, 0, code, errOut)
	var tv tasks.View
	require.NoError(t, json.Unmarshal([]byte(out), &tv), out)
	var seq []string
	for _, ev := range tv.History {
		if ev.Event == tasks.EventFailed || ev.Event == tasks.EventSucceeded {
			seq = append(seq, ev.Event+"@"+ev.Agent)
		}
	}
	require.Equal(t, []string{"failed@llm", "succeeded@llm_backup"}, seq, out)
	require.Equal(t, 1, tv.Attempts)

	// Breakers: the primary's open, the fallback's closed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, errOut, code = run(t, "", b.inspector, "--redis", srv.URL(), "breakers", "--json")
		require.Equal(t, 0, code, errOut)
		states := map[string]breaker.Snapshot{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var s breaker.Snapshot
			require.NoError(t, json.Unmarshal([]byte(line), &s), line)
			states[s.Key] = s
		}
		p, okP := states["llm.primary"]
		f, okF := states["llm.backup"]
		if okP && okF {
			require.Equal(t, breaker.StateOpen, p.State)
			require.Equal(t, breaker.HealthUnhealthy, p.Health)
			require.Equal(t, breaker.StateClosed, f.State)
			require.Zero(t, f.FailureCount)
			break
		}
		require.True(t, time.Now().Before(deadline), "breakers not listed: %s", out)
		time.Sleep(100 * time.Millisecond) // the fallback's happy-path successes reach the index at the next flush
	}

	// The metric says why each call fell back.
	resp, err := http.Get("http://" + ops + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `agentq_fallbacks_total{agent="llm",class="provider_error",fallback="llm_backup"}`)
	require.Contains(t, string(metrics), `agentq_fallbacks_total{agent="llm",class="breaker_open",fallback="llm_backup"}`)

	require.Equal(t, 0, w.stop(t, 15*time.Second))
}
