package worker

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// flakyTraced fails its first call (an unrecognised error: provider_error,
// retried) and succeeds after, recording each request's traceparent.
type flakyTraced struct {
	mu    sync.Mutex
	calls []agent.Request
}

func (f *flakyTraced) Run(_ context.Context, req agent.Request) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	if len(f.calls) == 1 {
		// A backend's 500: provider_error by its status, whatever the
		// learned model would make of a bare text.
		return nil, &resilience.Failure{Status: 500, Text: "upstream hiccup"}
	}
	return json.RawMessage(`{"ok":true}`), nil
}

func (f *flakyTraced) requests() []agent.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.Request(nil), f.calls...)
}

const tracedYAML = `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 0}
agents:
  llm: {}
`

// waitSpans polls exp until it holds a span named name, and returns all.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := exp.GetSpans()
		for _, s := range spans {
			if s.Name == name {
				return spans
			}
		}
		require.True(t, time.Now().Before(deadline), "no %q span within 10s (have %d spans)", name, len(spans))
		time.Sleep(10 * time.Millisecond)
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTraceSpanTree: a traced task that fails once and then succeeds is
// one trace: the caller's span → the enqueue span (Producer) → the run
// span (Consumer) → two attempt spans, attempt 1 with its error class and
// status Error, attempt 2 ok; the agent gets each attempt span's context.
func TestTraceSpanTree(t *testing.T) {
	t.Parallel()
	exp, tp := memoryTracer(t)
	llm := &flakyTraced{}
	_, rdb := runWorker(t, tracedYAML, WithAgent("llm", llm), WithTracerProvider(tp))

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	c := tasks.NewClient(rdb, tasks.WithTracerProvider(tp))
	res, err := c.Enqueue(ctx, tasks.Task{ID: "traced-1", Agent: "llm", Action: "chat", Params: json.RawMessage(`{}`)})
	require.NoError(t, err)
	caller.End()

	v := waitState(t, rdb, res.ID, 20*time.Second, func(v *tasks.View) bool { return v.State.Terminal() })
	require.Equal(t, tasks.StateSucceeded, v.State)
	spans := waitSpans(t, exp, tracing.SpanRun)

	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["caller"], 1)
	require.Len(t, byName[tracing.SpanEnqueue], 1)
	require.Len(t, byName[tracing.SpanRun], 1)
	require.Len(t, byName[tracing.SpanAttempt], 2)
	tid := caller.SpanContext().TraceID()
	for _, s := range spans {
		require.Equal(t, tid, s.SpanContext.TraceID(), "span %s is in another trace", s.Name)
	}

	enq := byName[tracing.SpanEnqueue][0]
	require.Equal(t, trace.SpanKindProducer, enq.SpanKind)
	require.Equal(t, caller.SpanContext().SpanID(), enq.Parent.SpanID())
	require.Equal(t, "traced-1", attrs(enq)[tracing.AttrTaskID].AsString())

	run := byName[tracing.SpanRun][0]
	require.Equal(t, trace.SpanKindConsumer, run.SpanKind)
	require.Equal(t, enq.SpanContext.SpanID(), run.Parent.SpanID(), "the run is a child of the enqueue")
	require.Equal(t, "succeeded", attrs(run)[tracing.AttrOutcome].AsString())
	require.NotEqual(t, codes.Error, run.Status.Code)

	byAttempt := map[int64]tracetest.SpanStub{}
	for _, a := range byName[tracing.SpanAttempt] {
		require.Equal(t, run.SpanContext.SpanID(), a.Parent.SpanID(), "an attempt is a child of its run")
		m := attrs(a)
		require.Equal(t, "llm", m[tracing.AttrAgent].AsString())
		require.Equal(t, "chat", m[tracing.AttrAction].AsString())
		require.Equal(t, "traced-1", m[tracing.AttrTaskID].AsString())
		require.Equal(t, int64(0), m[tracing.AttrRestart].AsInt64())
		require.Equal(t, "closed", m[tracing.AttrBreakerState].AsString())
		byAttempt[m[tracing.AttrAttempt].AsInt64()] = a
	}
	require.Contains(t, byAttempt, int64(1))
	require.Contains(t, byAttempt, int64(2))
	first, second := byAttempt[1], byAttempt[2]
	require.Equal(t, string(resilience.ProviderError), attrs(first)[tracing.AttrErrorClass].AsString())
	require.Equal(t, codes.Error, first.Status.Code)
	require.Equal(t, "", attrs(second)[tracing.AttrErrorClass].AsString())
	require.NotEqual(t, codes.Error, second.Status.Code)
	require.False(t, second.StartTime.Before(first.EndTime), "attempt 2 follows attempt 1")

	// The agent got each attempt's own context.
	reqs := llm.requests()
	require.Len(t, reqs, 2)
	for i, want := range []tracetest.SpanStub{first, second} {
		got := tracing.Parse(reqs[i].Traceparent, reqs[i].Tracestate)
		require.True(t, got.IsValid(), "request %d has traceparent %q", i, reqs[i].Traceparent)
		require.Equal(t, tid, got.TraceID())
		require.Equal(t, want.SpanContext.SpanID(), got.SpanID())
	}
}

// TestTraceUntracedProducer: a task enqueued without a span context is
// still one trace on a tracing worker: a root run span (its trace ID
// derived from the task) with its attempts as children.
func TestTraceUntracedProducer(t *testing.T) {
	t.Parallel()
	exp, tp := memoryTracer(t)
	_, rdb := runWorker(t, tracedYAML, WithAgent("llm", &flakyTraced{}), WithTracerProvider(tp))
	res, err := tasks.NewClient(rdb, tasks.WithTracerProvider(noop.NewTracerProvider())).
		Enqueue(context.Background(), tasks.Task{ID: "untraced-1", Agent: "llm"})
	require.NoError(t, err)
	waitState(t, rdb, res.ID, 20*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })
	spans := waitSpans(t, exp, tracing.SpanRun)
	var run tracetest.SpanStub
	var attempts []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case tracing.SpanRun:
			run = s
		case tracing.SpanAttempt:
			attempts = append(attempts, s)
		}
	}
	require.False(t, run.Parent.IsValid(), "a root run span")
	require.Len(t, attempts, 2)
	for _, a := range attempts {
		require.Equal(t, run.SpanContext.TraceID(), a.SpanContext.TraceID())
		require.Equal(t, run.SpanContext.SpanID(), a.Parent.SpanID())
	}
}

// TestTraceOffPassesProducerContext: a worker that does not trace (no-op
// provider) hands the agent the producer's traceparent as the task
// carries it, and builds no span.
func TestTraceOffPassesProducerContext(t *testing.T) {
	t.Parallel()
	llm := &flakyTraced{}
	_, rdb := runWorker(t, tracedYAML, WithAgent("llm", llm), WithTracerProvider(noop.NewTracerProvider()))
	exp, tp := memoryTracer(t)
	res, err := tasks.NewClient(rdb, tasks.WithTracerProvider(tp)).
		Enqueue(context.Background(), tasks.Task{ID: "off-1", Agent: "llm"})
	require.NoError(t, err)
	waitState(t, rdb, res.ID, 20*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })
	spans := exp.GetSpans()
	require.Len(t, spans, 1, "only the producer traces")
	want, _ := tracing.Format(spans[0].SpanContext)
	reqs := llm.requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.Equal(t, want, r.Traceparent, "the producer's context, as it came")
	}
}

// TestTraceRestartRuns: a run that ends restarting and its restart are two
// run spans, each with its own attempts, both children of the one enqueue
// span (restarts carry the producer's context).
func TestTraceRestartRuns(t *testing.T) {
	t.Parallel()
	exp, tp := memoryTracer(t)
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
  restart: {max_restarts: 1, delays: [50ms]}
agents:
  llm: {}
`, WithAgent("llm", &flakyTraced{}), WithTracerProvider(tp))
	res, err := tasks.NewClient(rdb, tasks.WithTracerProvider(tp)).Enqueue(context.Background(), tasks.Task{ID: "restarted-1", Agent: "llm"})
	require.NoError(t, err)
	waitState(t, rdb, res.ID, 20*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateSucceeded })

	deadline := time.Now().Add(10 * time.Second)
	var enq tracetest.SpanStub
	runs := map[int64]tracetest.SpanStub{}
	var attempts []tracetest.SpanStub
	for len(runs) < 2 || len(attempts) < 2 {
		require.True(t, time.Now().Before(deadline), "spans: %d runs, %d attempts", len(runs), len(attempts))
		time.Sleep(10 * time.Millisecond)
		runs, attempts = map[int64]tracetest.SpanStub{}, nil
		for _, s := range exp.GetSpans() {
			switch s.Name {
			case tracing.SpanEnqueue:
				enq = s
			case tracing.SpanRun:
				runs[attrs(s)[tracing.AttrRun].AsInt64()] = s
			case tracing.SpanAttempt:
				attempts = append(attempts, s)
			}
		}
	}
	require.Equal(t, "restarting", attrs(runs[0])[tracing.AttrOutcome].AsString())
	require.Equal(t, codes.Error, runs[0].Status.Code)
	require.Equal(t, "succeeded", attrs(runs[1])[tracing.AttrOutcome].AsString())
	require.Equal(t, int64(1), attrs(runs[1])[tracing.AttrRestart].AsInt64())
	for _, r := range runs {
		require.Equal(t, enq.SpanContext.SpanID(), r.Parent.SpanID(), "every run is a child of the enqueue")
		require.Equal(t, enq.SpanContext.TraceID(), r.SpanContext.TraceID())
	}
	require.NotEqual(t, runs[0].SpanContext.SpanID(), runs[1].SpanContext.SpanID())
	for _, a := range attempts {
		run := runs[attrs(a)[tracing.AttrRun].AsInt64()]
		require.Equal(t, run.SpanContext.SpanID(), a.Parent.SpanID(), "an attempt is a child of its own run")
	}
}

// runSpans returns the run spans of task id in exp once there are n.
func runSpans(t *testing.T, exp *tracetest.InMemoryExporter, id string, n int) (runs, attempts []tracetest.SpanStub) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, attempts = nil, nil
		for _, s := range exp.GetSpans() {
			if attrs(s)[tracing.AttrTaskID].AsString() != id {
				continue
			}
			switch s.Name {
			case tracing.SpanRun:
				runs = append(runs, s)
			case tracing.SpanAttempt:
				attempts = append(attempts, s)
			}
		}
		if len(runs) >= n {
			return runs, attempts
		}
		require.True(t, time.Now().Before(deadline), "task %s: %d run spans within 10s, want %d", id, len(runs), n)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTraceRestartRefusedIsDeadLettered: a run whose class would restart
// but whose agent has no restarts (max_restarts: 0) is dead-lettered, and
// its run span says dead_lettered, not restarting.
func TestTraceRestartRefusedIsDeadLettered(t *testing.T) {
	t.Parallel()
	exp, tp := memoryTracer(t)
	_, rdb := runWorker(t, `
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 1}
  restart: {max_restarts: 0}
agents:
  llm: {}
`, WithAgent("llm", agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		// A backend's 500: provider_error by its status, whatever the
		// learned model would make of a bare text.
		return nil, &resilience.Failure{Status: 500, Text: "upstream hiccup"} // provider_error: exhausted → restart
	})), WithTracerProvider(tp))
	_, err := tasks.NewClient(rdb, tasks.WithTracerProvider(tp)).Enqueue(context.Background(), tasks.Task{ID: "no-restart", Agent: "llm"})
	require.NoError(t, err)
	waitState(t, rdb, "no-restart", 20*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateDeadLettered })
	runs, _ := runSpans(t, exp, "no-restart", 1)
	require.Len(t, runs, 1)
	require.Equal(t, "dead_lettered", attrs(runs[0])[tracing.AttrOutcome].AsString())
	require.Equal(t, codes.Error, runs[0].Status.Code)
}

// TestTraceCanceledRun: a run canceled while its agent runs still gets
// its run span (outcome canceled), so its attempt's parent exists.
func TestTraceCanceledRun(t *testing.T) {
	t.Parallel()
	exp, tp := memoryTracer(t)
	started := make(chan struct{}, 4)
	_, rdb := runWorker(t, tracedYAML, WithAgent("llm", agent.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})), WithTracerProvider(tp))
	c := tasks.NewClient(rdb, tasks.WithTracerProvider(tp))
	_, err := c.Enqueue(context.Background(), tasks.Task{ID: "canceled-run", Agent: "llm"})
	require.NoError(t, err)
	<-started
	waitState(t, rdb, "canceled-run", 10*time.Second, func(v *tasks.View) bool { return v.State == tasks.StateActive })
	_, err = c.Cancel(context.Background(), "canceled-run", "test")
	require.NoError(t, err)
	runs, attempts := runSpans(t, exp, "canceled-run", 1)
	require.Len(t, runs, 1)
	require.Equal(t, "canceled", attrs(runs[0])[tracing.AttrOutcome].AsString())
	require.NotEmpty(t, attempts)
	for _, a := range attempts {
		require.Equal(t, runs[0].SpanContext.SpanID(), a.Parent.SpanID(), "the attempt's run span exists")
	}
}

// memoryTracer is a tracer provider (with agentq's ID generator) whose
// spans go, as they end, to the in-memory exporter it returns.
func memoryTracer(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp
}
