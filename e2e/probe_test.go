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
	"github.com/agentq/agentq/tasks"
)

// probeHit is one request that reached a probeBackend.
type probeHit struct {
	probe bool // GET /healthz, else a task's POST
	up    bool
}

// probeBackend serves an HTTP agent (POST /v1/chat) and its health
// endpoint (GET /healthz); both answer 503 while down.
type probeBackend struct {
	srv  *httptest.Server
	up   atomic.Bool
	mu   sync.Mutex
	hits []probeHit
}

func newProbeBackend(t *testing.T) *probeBackend {
	b := &probeBackend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		up := b.up.Load()
		b.mu.Lock()
		b.hits = append(b.hits, probeHit{probe: r.URL.Path == "/healthz", up: up})
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"message":"internal error","type":"server_error"}}`)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// counts returns the task calls and the probes (failed ones apart) so far.
func (b *probeBackend) counts() (taskCalls, probes, failedProbes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.hits {
		switch {
		case !h.probe:
			taskCalls++
		case !h.up:
			probes++
			failedProbes++
		default:
			probes++
		}
	}
	return
}

// TestProbeEndToEnd: the backend goes down, real tasks open the breaker;
// from then on no task reaches the backend, not even when a cooldown ends
// (the probe is the half-open trial, and fails); when the backend
// recovers the probe closes the breaker and the tasks run and succeed.
func TestProbeEndToEnd(t *testing.T) {
	t.Parallel()
	const nTasks = 8
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newProbeBackend(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 5s
  retry: {max_attempts: 1}
  restart: {max_restarts: 20, delays: [500ms]}
agents:
  llm:
    http: {url: %q}
    circuit_breaker: {failure_threshold: 2, cooldown: 1s}
    health: {url: %q, interval: 300ms, timeout: 2s}
`, be.srv.URL+"/v1/chat", be.srv.URL+"/healthz"))
	ops := freeAddr(t)
	w := start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	br := breaker.New(rdb)

	var lines, ids []string
	for i := range nTasks {
		id := fmt.Sprintf("probe-%02d", i)
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","params":{"n":%d}}`, id, i))
	}
	_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", srv.URL(), "--file", "-")
	require.Equal(t, 0, code, errOut)

	// Real calls open the breaker.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := br.Get(t.Context(), "llm")
		require.NoError(t, err)
		if s.State == breaker.StateOpen {
			break
		}
		require.True(t, time.Now().Before(deadline), "breaker did not open: %+v", s)
		time.Sleep(10 * time.Millisecond)
	}
	// Let the calls admitted before the opening finish (each answers at
	// once), then count: from here on no task may reach the backend while
	// it is down, through several cooldowns whose trials are probes.
	settle := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(settle) {
		time.Sleep(50 * time.Millisecond)
	}
	tasksBefore, _, failedBefore := be.counts()
	require.Positive(t, tasksBefore)
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, _, failed := be.counts()
		if failed >= failedBefore+3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the probe did not retry after the cooldowns")
		time.Sleep(20 * time.Millisecond)
	}
	tasksNow, _, _ := be.counts()
	require.Equal(t, tasksBefore, tasksNow, "a real task reached the backend while the breaker was not closed")
	s, err := br.Get(t.Context(), "llm")
	require.NoError(t, err)
	require.NotEqual(t, breaker.StateClosed, s.State)

	// The ops API shows the failing probe.
	var agents struct {
		Agents []struct {
			Agent string               `json:"agent"`
			State string               `json:"state"`
			Probe *breaker.ProbeStatus `json:"probe"`
		} `json:"agents"`
	}
	resp, err := http.Get("http://" + ops + "/api/v1/agents")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&agents))
	resp.Body.Close()
	require.Len(t, agents.Agents, 1)
	require.NotNil(t, agents.Agents[0].Probe)
	require.NotNil(t, agents.Agents[0].Probe.LastAt)
	require.False(t, agents.Agents[0].Probe.LastOK)
	require.Contains(t, agents.Agents[0].Probe.Error, "503")

	// Recovery: the probe closes the breaker, then the tasks flow.
	be.up.Store(true)
	views := waitStates(t, rdb, ids, 40*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateSucceeded, views[id].State, id)
	}
	be.mu.Lock()
	firstUp := -1
	for i, h := range be.hits {
		if h.up {
			firstUp = i
			break
		}
	}
	require.GreaterOrEqual(t, firstUp, 0)
	require.True(t, be.hits[firstUp].probe, "the first call after the recovery must be the probe (the trial), not a task")
	be.mu.Unlock()
	s, err = br.Get(t.Context(), "llm")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, s.State)

	resp, err = http.Get("http://" + ops + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `agentq_probe_total{agent="llm",result="fail"}`)
	require.Contains(t, string(metrics), `agentq_probe_total{agent="llm",result="ok"}`)
	require.Contains(t, string(metrics), `agentq_probe_duration_seconds_count{agent="llm"}`)

	require.Equal(t, 0, w.stop(t, 15*time.Second))
}
