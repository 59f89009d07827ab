package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

const testToken = "console-s3cret"

// testConfig names two agents: llm (breaker key llm.example; a budget of
// $0.05 an hour) and tool, and tenant acme (weight 3, cap 2:
// brokertest.Config; 1000 tokens an hour); every other tenant has 5000
// tokens and $1 a day (defaults.tenant).
func testConfig() *config.Config {
	cfg := config.Default()
	cfg.Tenants = map[string]config.Tenant{"acme": {Weight: 3, Concurrency: 2, Budget: &config.Budget{Tokens: 1000, Per: time.Hour}}}
	cfg.Agents = map[string]config.Agent{
		"tool": {Name: "tool", Settings: cfg.Defaults.Clone()},
		"llm": {Name: "llm", BreakerKey: "llm.example", Fallback: []string{"tool"}, Settings: cfg.Defaults.Clone(),
			Budget: &config.Budget{USD: 0.05, Per: time.Hour}},
	}
	cfg.Defaults.Tenant.Budget = &config.Budget{Tokens: 5000, USD: 1, Per: 24 * time.Hour}
	return cfg
}

// fixture is a console behind the API server on a real redis-server.
type fixture struct {
	url     string
	redis   *redistest.Server
	cfg     *config.Config
	rdb     *redis.Client
	dlq     *deadletter.Store
	store   *tasks.Store
	client  *tasks.Client
	sampler *Sampler
	cancels *fakeCanceler
}

type fakeCanceler struct{ ids chan string }

func (f *fakeCanceler) Cancel(_ context.Context, id, _ string) error {
	f.ids <- id
	return nil
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := testConfig()
	log := slog.New(slog.DiscardHandler)
	client := tasks.NewClient(rdb, cfg.ClientOptions()...)
	f := &fixture{redis: srv, cfg: cfg, rdb: rdb, dlq: deadletter.NewStore(rdb), store: client.Store(), client: client,
		sampler: NewSampler(rdb, SamplerOptions{Logger: log}), cancels: &fakeCanceler{ids: make(chan string, 4)}}
	f.url = f.replica(t, token, log)
	return f
}

// replica serves another console and API on the fixture's Redis, as
// another `enqueuer serve` would (one limiter shared by both, as serve
// does), and returns its URL.
func (f *fixture) replica(t *testing.T, token string, log *slog.Logger) string {
	t.Helper()
	return f.replicaWith(t, token, log, f.sampler)
}

// replicaWith is replica with sampler as its console's.
func (f *fixture) replicaWith(t *testing.T, token string, log *slog.Logger, sampler *Sampler) string {
	t.Helper()
	lim := httpx.NewLimiter(httpx.LimiterOptions{Logger: log})
	c := New(f.rdb, f.cfg, Options{Token: token, Sampler: sampler, Client: f.client, Canceler: f.cancels, Logger: log, Limiter: lim})
	t.Cleanup(c.Close)
	hs := httptest.NewServer(api.New(f.rdb, f.cfg, api.Options{Token: token, Logger: log, UI: c.Handler(), Limiter: lim}).Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// seedDeadLetters stores n dead letters dl-1 … dl-n (dl-n newest), agents
// alternating llm and tool.
func (f *fixture) seedDeadLetters(t *testing.T, n int) {
	t.Helper()
	base := time.Now().Add(-time.Hour).UTC()
	entries := make([]*deadletter.Entry, n)
	for i := range n {
		agent, class := "llm", "rate_limited"
		if i%2 == 1 {
			agent, class = "tool", "invalid_request"
		}
		at := base.Add(time.Duration(i) * time.Second)
		entries[i] = &deadletter.Entry{
			ID: fmt.Sprintf("dl-%d", i+1), Agent: agent, Action: "summarize", Params: json.RawMessage(`{"doc":"report.pdf","pages":[1,2]}`),
			ErrorClass: class, ClassifiedBy: "status", Error: "HTTP 429: slow down", Reason: deadletter.ReasonAttemptsExhausted,
			Attempts: 3, Restarts: 0, DeadLetteredAt: at, EnqueuedAt: at.Add(-time.Minute), Queue: "default", Run: 1,
			History: []tasks.Event{
				{At: at.Add(-time.Minute), Event: tasks.EventQueued},
				{At: at.Add(-50 * time.Second), Event: tasks.EventRetrying, Attempt: 1, ErrorClass: class, Error: "HTTP 429: slow down", DelayMS: 2000},
				{At: at, Event: tasks.EventDeadLettered, Attempt: 3, ErrorClass: class, ClassifiedBy: "status", Error: "HTTP 429: slow down"},
			},
		}
	}
	_, err := f.dlq.PutMany(context.Background(), entries)
	require.NoError(t, err)
}

// seedTask enqueues task id for agent llm with one failed attempt in its history.
func (f *fixture) seedTask(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: id, Agent: "llm", Action: "summarize", Params: json.RawMessage(`{"doc":"a.pdf"}`)})
	require.NoError(t, err)
	_, err = record.StoreOf(f.store).Apply(ctx, record.Delivery{ID: id, Attempt: 1}, record.Retrying(record.Attempt{Attempt: 1, Agent: "llm", ErrorClass: "timeout",
		ClassifiedBy: "structure", Error: "context deadline exceeded after 30s", Duration: 30 * time.Second}, 2*time.Second, time.Now().Add(2*time.Second)))
	require.NoError(t, err)
}
