package tasks

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/tracing"
)

func queuedEnvelope(t *testing.T, insp *asynq.Inspector, id string) *Envelope {
	t.Helper()
	info, err := insp.GetTaskInfo(DefaultQueue, id)
	require.NoError(t, err)
	env, err := Decode(info.Payload)
	require.NoError(t, err)
	return env
}

// TestEnqueueTraceContext: Enqueue and EnqueueMany give each task a
// Producer span, child of the caller's, whose W3C context the queued
// envelope carries; without a recording tracer the envelope carries the
// caller's own context, and nothing when there is none.
func TestEnqueueTraceContext(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewTracerProvider(sdktrace.WithSyncer(exp))
	c := NewClient(rdb, WithTracerProvider(tp))
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")

	_, err := c.Enqueue(ctx, Task{ID: "one", Agent: "tool"})
	require.NoError(t, err)
	res, err := c.Enqueue(ctx, Task{ID: "one", Agent: "tool"})
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	_, err = c.EnqueueMany(ctx, []Task{{ID: "m1", Agent: "tool"}, {ID: "m2", Agent: "tool"}})
	require.NoError(t, err)
	caller.End()

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.Name != tracing.SpanEnqueue {
			continue
		}
		require.Equal(t, trace.SpanKindProducer, s.SpanKind)
		require.Equal(t, caller.SpanContext().SpanID(), s.Parent.SpanID())
		require.NotEqual(t, codes.Error, s.Status.Code)
		for _, kv := range s.Attributes {
			if kv.Key == tracing.AttrTaskID {
				if _, seen := spans[kv.Value.AsString()]; !seen {
					spans[kv.Value.AsString()] = s
				}
			}
		}
	}
	require.Len(t, spans, 3, "one span per task (the duplicate has its own)")
	for _, id := range []string{"one", "m1", "m2"} {
		env := queuedEnvelope(t, insp, id)
		want, _ := tracing.Format(spans[id].SpanContext)
		require.Equal(t, want, env.Traceparent, id)
	}

	// Tracing off: the caller's context travels as it is.
	off := NewClient(rdb, WithTracerProvider(noop.NewTracerProvider()))
	parent := tracing.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v")
	pctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	_, err = off.Enqueue(pctx, Task{ID: "off1", Agent: "tool"})
	require.NoError(t, err)
	_, err = off.EnqueueMany(pctx, []Task{{ID: "off2", Agent: "tool"}})
	require.NoError(t, err)
	_, err = off.Enqueue(context.Background(), Task{ID: "off3", Agent: "tool"})
	require.NoError(t, err)
	for _, id := range []string{"off1", "off2"} {
		env := queuedEnvelope(t, insp, id)
		require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", env.Traceparent, id)
		require.Equal(t, "k=v", env.Tracestate, id)
	}
	env := queuedEnvelope(t, insp, "off3")
	require.Empty(t, env.Traceparent)
	require.Empty(t, env.Tracestate)
}
