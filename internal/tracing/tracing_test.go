package tracing_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentq/agentq/internal/tracing"
)

const tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4318"}, true},
		{map[string]string{tracing.EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{tracing.EnvEndpoint: "http://x", tracing.EnvSDKDisabled: "true"}, false},
		{map[string]string{tracing.EnvEndpoint: "http://x", tracing.EnvSDKDisabled: "TRUE"}, false},
		{map[string]string{tracing.EnvEndpoint: "http://x", tracing.EnvSDKDisabled: "false"}, true},
		{map[string]string{tracing.EnvEndpoint: "http://x", tracing.EnvTracesExporter: "none"}, false},
		{map[string]string{tracing.EnvEndpoint: "http://x", tracing.EnvTracesExporter: "otlp"}, true},
	} {
		require.Equal(t, c.want, tracing.Enabled(env(c.env)), "%v", c.env)
	}
}

// TestSetupOffInstallsNothing: without the OTLP variables Setup leaves the
// global no-op tracer in place (this test's process has none set).
func TestSetupOffInstallsNothing(t *testing.T) {
	t.Parallel()
	if tracing.Enabled(nil) {
		t.Fatalf("the test environment sets %s or %s", tracing.EnvEndpoint, tracing.EnvTracesEndpoint)
	}
	shutdown, err := tracing.Setup(context.Background(), tracing.WithServiceName("x"))
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	_, span := otelTracer().Start(context.Background(), "s")
	require.False(t, span.IsRecording())
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	sc := tracing.Parse(tp1, "congo=t61rcWkgMzE")
	require.True(t, sc.IsValid())
	require.True(t, sc.IsRemote())
	require.True(t, sc.IsSampled())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	p, s := tracing.Format(sc)
	require.Equal(t, tp1, p)
	require.Equal(t, "congo=t61rcWkgMzE", s)
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"} {
		require.False(t, tracing.Parse(bad, "").IsValid(), bad)
	}
	p, s = tracing.Format(trace.SpanContext{})
	require.Empty(t, p)
	require.Empty(t, s)
}

func TestRunIDs(t *testing.T) {
	t.Parallel()
	parent := tracing.Parse(tp1, "")
	at := time.Unix(1700000000, 5)
	tid, sid := tracing.RunIDs(parent, "task", at, 0)
	require.Equal(t, parent.TraceID(), tid, "a run is in its producer's trace")
	tid2, sid2 := tracing.RunIDs(parent, "task", at, 0)
	require.Equal(t, tid, tid2)
	require.Equal(t, sid, sid2, "every delivery computes the same run span ID")
	_, other := tracing.RunIDs(parent, "task", at, 1)
	require.NotEqual(t, sid, other, "each run has its own span")
	rtid, rsid := tracing.RunIDs(trace.SpanContext{}, "task", at, 0)
	require.True(t, rtid.IsValid())
	require.True(t, rsid.IsValid())
	otid, _ := tracing.RunIDs(trace.SpanContext{}, "task", at.Add(time.Nanosecond), 0)
	require.NotEqual(t, rtid, otid, "another enqueue of the same ID is another trace")
	rc := tracing.RunSpanContext(trace.SpanContext{}, "task", at, 0)
	require.True(t, rc.IsSampled())
	require.Equal(t, rtid, rc.TraceID())
	require.Equal(t, rsid, rc.SpanID())
}

// TestIDGenerator: a span started from WithIDs gets those IDs (as a root
// and as a child); every other span gets fresh random ones.
func TestIDGenerator(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer("t")
	parent := tracing.Parse(tp1, "")
	tid, sid := tracing.RunIDs(parent, "x", time.Time{}, 0)
	_, s := tr.Start(tracing.WithIDs(trace.ContextWithRemoteSpanContext(context.Background(), parent), tid, sid), "child")
	require.Equal(t, sid, s.SpanContext().SpanID())
	require.Equal(t, parent.TraceID(), s.SpanContext().TraceID())
	s.End()
	rtid, rsid := tracing.RunIDs(trace.SpanContext{}, "x", time.Time{}, 0)
	_, s = tr.Start(tracing.WithIDs(context.Background(), rtid, rsid), "root", trace.WithNewRoot())
	require.Equal(t, rtid, s.SpanContext().TraceID())
	require.Equal(t, rsid, s.SpanContext().SpanID())
	s.End()
	_, a := tr.Start(context.Background(), "a")
	_, b := tr.Start(context.Background(), "b")
	require.NotEqual(t, a.SpanContext().TraceID(), b.SpanContext().TraceID())
	require.NotEqual(t, a.SpanContext().SpanID(), b.SpanContext().SpanID())
	require.Len(t, exp.GetSpans(), 2)
}

func TestExtract(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	ctx := context.Background()
	require.Equal(t, ctx, tracing.Extract(ctx, h))
	h.Set("traceparent", tp1)
	sc := trace.SpanContextFromContext(tracing.Extract(ctx, h))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	sc = trace.SpanContextFromContext(tracing.ExtractEnv(ctx, env(map[string]string{"TRACEPARENT": tp1})))
	require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	require.False(t, trace.SpanContextFromContext(tracing.ExtractEnv(ctx, env(nil))).IsValid())
}

func TestActive(t *testing.T) {
	t.Parallel()
	require.False(t, tracing.Active(nil))
	require.False(t, tracing.Active(noop.NewTracerProvider()))
	require.False(t, tracing.Active(otel.GetTracerProvider()), "the global provider before Setup installs one")
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewTracerProvider(sdktrace.WithSyncer(exp))
	require.True(t, tracing.Active(tp))
	never := tracing.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.NeverSample()))
	require.True(t, tracing.Active(never), "a provider that samples nothing still propagates")
	require.Empty(t, exp.GetSpans(), "the probe is never exported")
}
