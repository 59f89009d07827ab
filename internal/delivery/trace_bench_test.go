package delivery

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/tasks"
)

// BenchmarkTraceHooks measures what tracing adds to one task's delivery
// (an attempt span, the agent's context, the run span): with the global
// tracer as a process without OTEL_* has it (off), and with a recording
// SDK provider (on). `go test -run - -bench TraceHooks -benchmem ./worker/`
func BenchmarkTraceHooks(b *testing.B) {
	sp := &Spec{name: "llm"}
	g := &admitted{sp: sp, adm: breaker.Admission{Allowed: true, State: breaker.StateClosed}}
	for _, c := range []struct {
		name   string
		tracer func() *Executor
		tp     string
	}{
		{"off", func() *Executor {
			return &Executor{tracer: otel.GetTracerProvider().Tracer(tracing.TracerName), traced: tracing.Active(otel.GetTracerProvider())}
		}, ""},
		{"off-traced-producer", func() *Executor {
			return &Executor{tracer: otel.GetTracerProvider().Tracer(tracing.TracerName), traced: tracing.Active(otel.GetTracerProvider())}
		},
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"on", func() *Executor {
			tp := tracing.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			return &Executor{tracer: tp.Tracer(tracing.TracerName), traced: true, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := c.tracer()
			env := &tasks.Envelope{ID: "t1", Agent: "llm", EnqueuedAt: time.Now(), Traceparent: c.tp}
			a := &attemptResult{n: 1, served: sp}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				actx, span := p.startAttemptSpan(ctx, env, sp, g)
				_, _ = agentTrace(actx, env)
				p.endAttemptSpan(span, env, sp, a)
				p.endRunSpan(env, a, runSucceeded, "")
			}
		})
	}
}
