package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// calls records the requests a Go agent received.
type calls struct {
	mu   sync.Mutex
	reqs []agent.Request
}

func (c *calls) add(r agent.Request) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
}

func (c *calls) all() []agent.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]agent.Request(nil), c.reqs...)
}

// fixedAgent answers every call with err (nil: success) and records it.
func fixedAgent(c *calls, err error) agent.Runner {
	return agent.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		c.add(r)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`{"by":"` + r.Agent + `"}`), nil
	})
}

// runWorker parses yaml (with the redis URL prepended), starts a worker on
// a fresh real redis-server and stops it at the end of the test.
func runWorker(t *testing.T, yaml string, opts ...Option) (*Worker, redis.UniversalClient) {
	t.Helper()
	return runWorkerRedis(t, "", yaml, opts...)
}

// runWorkerRedis is runWorker with more fields of the redis block
// (redisExtra, e.g. "wait_replicas: 1").
func runWorkerRedis(t *testing.T, redisExtra, yaml string, opts ...Option) (*Worker, redis.UniversalClient) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	w := newTestWorker(t, srv, redisExtra, yaml, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return w, rdb
}

// newTestWorker builds (does not run) a worker on srv from yaml, with
// redisExtra in its redis block, logging nowhere.
func newTestWorker(t *testing.T, srv *redistest.Server, redisExtra, yaml string, opts ...Option) *Worker {
	t.Helper()
	if redisExtra != "" {
		redisExtra = ", " + redisExtra
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("redis: {url: %q%s}\n%s", srv.URL(), redisExtra, yaml)), "test.yaml")
	require.NoError(t, err)
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	w, err := New(cfg, srv.Client(), opts...)
	require.NoError(t, err)
	return w
}

func enqueueN(t *testing.T, rdb redis.UniversalClient, agentName string, n int) []string {
	t.Helper()
	c := tasks.NewClient(rdb)
	var ids []string
	for i := range n {
		res, err := c.Enqueue(context.Background(), tasks.Task{ID: fmt.Sprintf("%s-%d", agentName, i), Agent: agentName, Params: json.RawMessage(`{}`)})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	return ids
}

// waitTerminal polls until every task is terminal.
func waitTerminal(t *testing.T, rdb redis.UniversalClient, ids []string, d time.Duration) map[string]*tasks.View {
	t.Helper()
	st := tasks.NewStore(rdb)
	out := map[string]*tasks.View{}
	deadline := time.Now().Add(d)
	for len(out) < len(ids) {
		for _, id := range ids {
			if v, err := st.Get(context.Background(), id); err == nil && v.State.Terminal() {
				out[id] = v
			}
		}
		if len(out) < len(ids) {
			require.True(t, time.Now().Before(deadline), "tasks not terminal within %s: %d of %d", d, len(out), len(ids))
			time.Sleep(20 * time.Millisecond)
		}
	}
	return out
}

func counterValue(t *testing.T, w *Worker, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := w.metrics.reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// eventsOf lists "event@agent" of a history.
func eventsOf(v *tasks.View) []string {
	var out []string
	for _, ev := range v.History {
		if ev.Event == tasks.EventQueued {
			continue
		}
		out = append(out, ev.Event+"@"+ev.Agent)
	}
	return out
}

const fallbackYAML = `
worker: {concurrency: 1, shutdown_timeout: 2s}
defaults:
  timeout: 5s
  retry: {max_attempts: 1}
  restart: {max_restarts: 0}
agents:
  primary:
    fallback: [second, third]
    circuit_breaker: {failure_threshold: 2, cooldown: 1m}
  second: {}
  third: {}
`

// TestFallback: a failure of a fallback class goes at once to the next
// agent whose breaker admits it; each call is its own history event under
// the agent that served it; the last failure is decided under the
// primary's table; other classes do not fall back.
func TestFallback(t *testing.T) {
	t.Parallel()
	overloaded := &resilience.Failure{Status: 500, Text: "internal server error"} // provider_error
	bad := resilience.WithClass(errors.New("bad params"), resilience.InvalidRequest)
	tests := []struct {
		name                   string
		primary, second, third error
		n                      int
		want                   []string // events of the first task
		state                  tasks.State
		served                 map[string]int // calls per agent
		byClass                map[string]float64
	}{
		{
			name: "second serves", primary: overloaded, n: 1,
			want: []string{"failed@primary", "succeeded@second"}, state: tasks.StateSucceeded,
			served: map[string]int{"primary": 1, "second": 1}, byClass: map[string]float64{"provider_error": 1},
		},
		{
			name: "through the chain", primary: overloaded, second: overloaded, n: 1,
			want: []string{"failed@primary", "failed@second", "succeeded@third"}, state: tasks.StateSucceeded,
			served: map[string]int{"primary": 1, "second": 1, "third": 1}, byClass: map[string]float64{"provider_error": 2},
		},
		{
			name: "chain exhausted: dead letter under the primary's table", primary: overloaded, second: overloaded, third: overloaded, n: 1,
			want:  []string{"failed@primary", "failed@second", "dead_lettered@third"},
			state: tasks.StateDeadLettered, served: map[string]int{"primary": 1, "second": 1, "third": 1},
			byClass: map[string]float64{"provider_error": 2},
		},
		{
			name: "no fallback for invalid_request", primary: bad, n: 1,
			want: []string{"dead_lettered@primary"}, state: tasks.StateDeadLettered,
			served: map[string]int{"primary": 1}, byClass: map[string]float64{},
		},
		{
			name: "open primary: straight to the fallback", primary: overloaded, n: 5,
			want: []string{"failed@primary", "succeeded@second"}, state: tasks.StateSucceeded,
			served:  map[string]int{"primary": 2, "second": 5},
			byClass: map[string]float64{"provider_error": 2, "breaker_open": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs := map[string]*calls{"primary": {}, "second": {}, "third": {}}
			w, rdb := runWorker(t, fallbackYAML,
				WithAgent("primary", fixedAgent(cs["primary"], tt.primary)),
				WithAgent("second", fixedAgent(cs["second"], tt.second)),
				WithAgent("third", fixedAgent(cs["third"], tt.third)))
			ids := enqueueN(t, rdb, "primary", 1)
			views := waitTerminal(t, rdb, ids, 20*time.Second)
			if tt.n > 1 {
				more := make([]string, 0, tt.n-1)
				c := tasks.NewClient(rdb)
				for i := 1; i < tt.n; i++ {
					res, err := c.Enqueue(context.Background(), tasks.Task{ID: fmt.Sprintf("more-%d", i), Agent: "primary"})
					require.NoError(t, err)
					more = append(more, res.ID)
				}
				for id, v := range waitTerminal(t, rdb, more, 20*time.Second) {
					require.Equal(t, tasks.StateSucceeded, v.State, id)
					last := v.History[len(v.History)-1]
					require.Equal(t, "second", last.Agent, id)
					why := "breaker_open" // the primary's breaker was open
					if lastEvent(v, tasks.EventFailed) != nil {
						why = "provider_error" // the primary was called before its breaker opened
					}
					require.Equal(t, why, last.Fallback, "%s: the event says why the call fell back", id)
				}
			}
			v := views[ids[0]]
			require.Equal(t, tt.state, v.State)
			require.Equal(t, tt.want, eventsOf(v))
			require.Equal(t, 1, v.Attempts, "the calls of a fallback chain are one attempt")
			for _, ev := range v.History {
				if ev.Event == tasks.EventFailed {
					require.Equal(t, 1, ev.Attempt)
					require.NotEmpty(t, ev.ErrorClass)
				}
				switch ev.Agent {
				case "primary", "":
					require.Empty(t, ev.Fallback, ev.Event)
				default: // a fallback served it after the last call's failure
					require.Equal(t, "provider_error", ev.Fallback, ev.Event)
				}
			}
			for name, c := range cs {
				got := c.all()
				require.Len(t, got, tt.served[name], name)
				for _, r := range got {
					require.Equal(t, name, r.Agent, "the Request names the agent called")
				}
			}
			for class, want := range tt.byClass {
				require.Equal(t, want, counterValue(t, w, "agentq_fallbacks_total", map[string]string{"agent": "primary", "class": class}), class)
			}
			if len(tt.byClass) == 0 {
				require.Zero(t, counterValue(t, w, "agentq_fallbacks_total", nil))
			}
			if tt.state == tasks.StateDeadLettered {
				e, err := deadletter.NewStore(rdb).Get(context.Background(), ids[0])
				require.NoError(t, err)
				require.Equal(t, 1, e.Attempts)
			}
			if tt.n > 1 {
				s, err := w.breakers.Get(context.Background(), "primary")
				require.NoError(t, err)
				require.Equal(t, breaker.StateOpen, s.State)
				s, err = w.breakers.Get(context.Background(), "second")
				require.NoError(t, err)
				require.Equal(t, breaker.StateClosed, s.State)
			}
		})
	}
}

// TestFallbackAllOpenDefers: when no breaker of the chain admits, the task
// is deferred as without fallback (no attempt, no call), until the soonest
// breaker of the chain may admit it.
func TestFallbackAllOpenDefers(t *testing.T) {
	t.Parallel()
	cs := map[string]*calls{"primary": {}, "second": {}, "third": {}}
	w, rdb := runWorker(t, fallbackYAML,
		WithAgent("primary", fixedAgent(cs["primary"], nil)),
		WithAgent("second", fixedAgent(cs["second"], nil)),
		WithAgent("third", fixedAgent(cs["third"], nil)))
	ctx := context.Background()
	for _, k := range []string{"primary", "second"} {
		require.NoError(t, w.breakers.Trip(ctx, k, time.Minute))
	}
	require.NoError(t, w.breakers.Trip(ctx, "third", 3*time.Second))
	ids := enqueueN(t, rdb, "primary", 1)
	st := tasks.NewStore(rdb)
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := st.Get(ctx, ids[0])
		if err == nil && v.State == tasks.StateDeferred {
			require.Zero(t, v.Attempts)
			break
		}
		require.True(t, time.Now().Before(deadline), "not deferred")
		time.Sleep(20 * time.Millisecond)
	}
	for name, c := range cs {
		require.Empty(t, c.all(), name)
	}
	v := waitTerminal(t, rdb, ids, 20*time.Second)[ids[0]]
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, "third", v.History[len(v.History)-1].Agent)
}

// TestOpsAgentsShowsFallbackAndProbe: /api/v1/agents lists an agent's
// fallbacks and, for an agent with a probe, its probe view.
func TestOpsAgentsShowsFallbackAndProbe(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(hs.Close)
	w, _ := runWorker(t, fmt.Sprintf(`
agents:
  primary:
    fallback: [second]
    health: {url: %q, interval: 50ms}
  second: {}
`, hs.URL+"/healthz"),
		WithAgent("primary", fixedAgent(&calls{}, nil)), WithAgent("second", fixedAgent(&calls{}, nil)))
	srv := httptest.NewServer(w.OpsHandler())
	t.Cleanup(srv.Close)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/api/v1/agents")
		require.NoError(t, err)
		var body struct {
			Agents []map[string]any `json:"agents"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		require.Len(t, body.Agents, 2)
		p, s := body.Agents[0], body.Agents[1]
		require.Equal(t, "primary", p["agent"])
		require.Equal(t, []any{"second"}, p["fallback"])
		require.NotContains(t, s, "probe")
		require.NotContains(t, s, "fallback")
		probe, _ := p["probe"].(map[string]any)
		require.NotNil(t, probe)
		if probe["last_at"] != nil {
			require.Equal(t, true, probe["last_ok"])
			require.Equal(t, 1.0, probe["success_rate"])
			require.Contains(t, probe, "latency_ms")
			require.Contains(t, probe, "error")
			break
		}
		require.True(t, time.Now().Before(deadline), "no probe recorded: %v", p)
		time.Sleep(20 * time.Millisecond)
	}
	require.Positive(t, counterValue(t, w, "agentq_probe_total", map[string]string{"agent": "primary", "result": "ok"}))
}
