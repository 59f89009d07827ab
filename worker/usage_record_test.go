package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// usageBackend is an OpenAI-shaped chat-completions backend on loopback:
// its first reply is a 500 whose body still reports usage, the next ones
// succeed with a partly cached prompt; it totals what it reported.
type usageBackend struct {
	calls               atomic.Int64
	in, out, cached, tt atomic.Int64
}

func (b *usageBackend) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := b.calls.Add(1)
	in, out, cached := int64(1000), int64(50), int64(0)
	if n > 1 {
		in, out, cached = 2006, 300, 1920
	}
	b.in.Add(in)
	b.out.Add(out)
	b.cached.Add(cached)
	b.tt.Add(in + out)
	body := fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion","model":"gpt-4o-2024-08-06",
  "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
  "usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		n, in, out, in+out, cached)
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		w.WriteHeader(http.StatusInternalServerError)
		body = `{"error":{"message":"the model stopped mid-answer","type":"server_error"},` + body[1:]
	}
	_, _ = w.Write([]byte(body))
}

// sinkRecorder is a usage.Sink that keeps what it is given.
type sinkRecorder struct {
	mu      sync.Mutex
	entries []usage.Entry
}

func (s *sinkRecorder) Add(e usage.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, e)
}

func (s *sinkRecorder) all() []usage.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]usage.Entry(nil), s.entries...)
}

// TestUsageRecorded: a task's usage is the sum of its attempts' as the
// backend reported them, a failed attempt's included, its cost priced
// from the config to the cent (a dated model takes its undated price);
// each attempt's event carries its own usage; the metrics, the sink and
// the attempt spans (OpenTelemetry GenAI attributes) get it too.
func TestUsageRecorded(t *testing.T) {
	t.Parallel()
	be := &usageBackend{}
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)
	sink := &sinkRecorder{}
	exp, tp := memoryTracer(t)
	w, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 0}
agents:
  llm: {http: {url: %q, body: params}}
tenants:
  acme: {weight: 1}
pricing:
  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10, cached_input_per_mtok: 1.25}
`, srv.URL), withUsageSink(sink), WithTracerProvider(tp))
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(context.Background(), tasks.Task{ID: "use-1", Agent: "llm", Tenant: "acme",
		Params: json.RawMessage(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)})
	require.NoError(t, err)
	v := waitState(t, rdb, "use-1", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Equal(t, int64(2), be.calls.Load())

	require.NotNil(t, v.Usage)
	require.Equal(t, be.in.Load(), v.Usage.InputTokens)
	require.Equal(t, be.out.Load(), v.Usage.OutputTokens)
	require.Equal(t, be.cached.Load(), v.Usage.CachedTokens)
	require.Equal(t, be.tt.Load(), v.Usage.TotalTokens)
	// (1000·2.5 + 50·10 + 86·2.5 + 1920·1.25 + 300·10) / 1e6 = 0.008615
	require.True(t, v.Usage.Priced)
	require.Equal(t, 0.86, math.Round(v.Usage.CostUSD*10000)/100, "cost in cents, to the cent")
	require.InDelta(t, 0.008615, v.Usage.CostUSD, 1e-9)

	var per []usage.Usage
	for _, ev := range v.History {
		if ev.Usage != nil {
			require.True(t, ev.AttemptOutcome(), "%s carries usage", ev.Event)
			per = append(per, *ev.Usage)
		}
	}
	require.Len(t, per, 2, "the failed attempt's event and the success's")
	require.Equal(t, "gpt-4o-2024-08-06", per[0].Model)
	require.InDelta(t, 0.003, per[0].CostUSD, 1e-12)
	require.Equal(t, int64(1920), per[1].CachedTokens)

	labels := map[string]string{"agent": "llm", "tenant": "acme", "model": "gpt-4o"}
	require.Equal(t, float64(be.in.Load()), counterValue(t, w, "agentq_tokens_total", with(labels, "kind", "input")))
	require.Equal(t, float64(be.out.Load()), counterValue(t, w, "agentq_tokens_total", with(labels, "kind", "output")))
	require.Equal(t, float64(be.cached.Load()), counterValue(t, w, "agentq_tokens_total", with(labels, "kind", "cached")))
	require.Equal(t, 0.008615, counterValue(t, w, "agentq_cost_usd_total", labels), "counted in nano-dollars: no float noise")

	entries := sink.all()
	require.Len(t, entries, 2)
	sum := usage.Usage{}
	for _, e := range entries {
		require.Equal(t, "llm", e.Agent)
		require.Equal(t, "acme", e.Tenant)
		require.False(t, e.At.IsZero())
		sum = sum.Add(e.Usage)
	}
	require.Equal(t, v.Usage.TotalTokens, sum.TotalTokens)
	require.InDelta(t, v.Usage.CostUSD, sum.CostUSD, 1e-12)

	spans := waitSpans(t, exp, tracing.SpanRun)
	var seen []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == tracing.SpanAttempt {
			seen = append(seen, s)
		}
	}
	require.Len(t, seen, 2)
	var inputs int64
	for _, s := range seen {
		m := attrs(s)
		inputs += m[tracing.AttrGenAIInputTokens].AsInt64()
		require.Positive(t, m[tracing.AttrGenAIOutputTokens].AsInt64())
		require.Equal(t, "gpt-4o", m[tracing.AttrGenAIRequestModel].AsString())
		require.Equal(t, "gpt-4o-2024-08-06", m[tracing.AttrGenAIResponseModel].AsString())
		require.Equal(t, usage.SystemOpenAI, m[tracing.AttrGenAISystem].AsString())
	}
	require.Equal(t, be.in.Load(), inputs)
}

// TestUsageNoneNoCost: a task whose agent reports no usage has no usage,
// no usage series and no sink entry.
func TestUsageNoneNoCost(t *testing.T) {
	t.Parallel()
	sink := &sinkRecorder{}
	w, rdb := runWorker(t, tracedYAML, WithAgent("llm", &flakyTraced{}), withUsageSink(sink))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "nouse-1", Agent: "llm"})
	require.NoError(t, err)
	v := waitState(t, rdb, "nouse-1", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.Nil(t, v.Usage)
	require.Empty(t, sink.all())
	require.Zero(t, counterValue(t, w, "agentq_tokens_total", nil))
}

// TestUsageUnpricedOther: a model the config does not price counts tokens
// only (no cost), under the model label other; an unnamed tenant is
// other too.
func TestUsageUnpricedOther(t *testing.T) {
	t.Parallel()
	be := &usageBackend{}
	be.calls.Store(1) // every reply succeeds
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)
	w, rdb := runWorker(t, fmt.Sprintf(`
agents:
  llm: {http: {url: %q}}
tenants:
  acme: {weight: 1}
pricing:
  claude-3-5-haiku: {input_per_mtok: 0.8, output_per_mtok: 4}
`, srv.URL))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "unp-1", Agent: "llm", Tenant: "somebody"})
	require.NoError(t, err)
	v := waitState(t, rdb, "unp-1", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	require.NotNil(t, v.Usage)
	require.False(t, v.Usage.Priced)
	require.Zero(t, v.Usage.CostUSD)
	require.Equal(t, int64(2306), v.Usage.TotalTokens)
	require.Equal(t, 2006.0, counterValue(t, w, "agentq_tokens_total",
		map[string]string{"agent": "llm", "tenant": "other", "model": "other", "kind": "input"}))
	require.Zero(t, counterValue(t, w, "agentq_cost_usd_total", nil))
}

// with returns labels plus k=v.
func with(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range labels {
		out[a] = b
	}
	return out
}

// TestUsageExecFailed: an exec agent's ActionResponse usage counts, on a
// failed attempt too (the agent helpers report it with errors).
func TestUsageExecFailed(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(`cat >/dev/null
echo '{"status":"error","code":400,"error":"bad prompt","usage":{"input_tokens":40,"output_tokens":2,"model":"gpt-4o-mini"}}'
`), 0o600))
	_, rdb := runWorker(t, fmt.Sprintf(`
defaults:
  retry: {max_attempts: 1}
  restart: {max_restarts: 0}
agents:
  sum: {exec: {command: [sh, %q], env: [PATH]}}
pricing:
  gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6}
`, script))
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "exec-1", Agent: "sum"})
	require.NoError(t, err)
	v := waitState(t, rdb, "exec-1", 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateDeadLettered, v.State)
	require.NotNil(t, v.Usage)
	require.Equal(t, int64(40), v.Usage.InputTokens)
	require.Equal(t, int64(2), v.Usage.OutputTokens)
	require.InDelta(t, (40*0.15+2*0.6)/1e6, v.Usage.CostUSD, 1e-15)
	last := v.History[len(v.History)-1]
	require.Equal(t, tasks.EventDeadLettered, last.Event)
	require.NotNil(t, last.Usage)
	require.Equal(t, "gpt-4o-mini", last.Usage.Model)
}
