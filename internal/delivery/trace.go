package delivery

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// Tracing (package tracing): every attempt is a span (tracing.SpanAttempt)
// whose parent is its run's span (tracing.SpanRun, kind Consumer), and
// the run's span is a child of the producer's enqueue span, whose W3C
// context the envelope carries (env.Traceparent). The attempts of a run
// are separate asynq deliveries, maybe on other workers, so the run span
// has IDs every delivery can compute (tracing.RunSpanContext) and is
// written once, by the delivery that ends the run (succeeded, restarting,
// dead-lettered). Restarts copy the envelope, so every run of a task is a
// child of the same enqueue span, in the same trace. With the no-op
// tracer (tracing off) spans cost a no-op Start and no attribute is
// built; the agent then gets the producer's traceparent as it came.
// A worker whose provider is not Active (tracing off) skips all of it:
// no span, no allocation; the agent gets the envelope's context as is.

// startAttemptSpan starts the span of the attempt about to be made of env
// by the admitted agent g (the task's agent sp, or a fallback) as a child
// of the run's span; the returned context carries it to call (which passes
// its context to the agent).
func (p *Executor) startAttemptSpan(ctx context.Context, env *tasks.Envelope, sp *Spec, g *admitted) (context.Context, trace.Span) {
	if !p.traced {
		return ctx, nil
	}
	parent := tracing.Parse(env.Traceparent, env.Tracestate)
	run := tracing.RunSpanContext(parent, env.ID, env.EnqueuedAt, env.Run)
	ctx, span := p.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, run), tracing.SpanAttempt)
	if span.IsRecording() {
		n := metaOf(ctx).attemptNumber()
		span.SetAttributes(attribute.String(tracing.AttrTaskID, env.ID), attribute.String(tracing.AttrAgent, env.Agent),
			attribute.String(tracing.AttrAction, env.Action), attribute.Int(tracing.AttrAttempt, n),
			attribute.Int(tracing.AttrRestart, env.Restarts), attribute.Int(tracing.AttrRun, env.Run),
			attribute.String(tracing.AttrBreakerState, string(g.adm.State)))
		if g.sp != sp {
			span.SetAttributes(attribute.String(tracing.AttrFallbackAgent, g.sp.name))
		}
	}
	return ctx, span
}

// endAttemptSpan ends an attempt's span with its outcome (a nil: the
// delivery did not run, see attempt) and the usage its last call reported
// (spanUsage); a nil span (not traced) is none.
func (p *Executor) endAttemptSpan(span trace.Span, env *tasks.Envelope, sp *Spec, a *attemptResult) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		switch {
		case a == nil:
			span.SetAttributes(attribute.String(tracing.AttrOutcome, "not_run"))
		default:
			class := a.call.verdict.Class
			span.SetAttributes(attribute.Int(tracing.AttrAttempt, a.n), attribute.String(tracing.AttrErrorClass, string(class)))
			if a.served != sp {
				span.SetAttributes(attribute.String(tracing.AttrFallbackAgent, a.served.name))
			}
			if class != "" {
				span.SetStatus(codes.Error, a.call.errText)
			}
			spanUsage(span, env, a.call)
		}
	}
	span.End()
}

// agentTrace is the W3C trace context handed to the agent: the attempt
// span's (on ctx) when it records, else the producer's as the envelope
// carries it (the worker does not trace, or did not sample the task).
func agentTrace(ctx context.Context, env *tasks.Envelope) (traceparent, tracestate string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return tracing.Format(span.SpanContext())
	}
	return env.Traceparent, env.Tracestate
}

// Run outcomes (the agentq.outcome attribute of a run span).
const (
	runSucceeded    = "succeeded"
	runRestarting   = "restarting"
	runDeadLettered = "dead_lettered"
	runCanceled     = "canceled"
)

// runOutcome is the outcome of a run whose attempt was settled with
// action; "" when the run goes on (a retry, a requeue at shutdown).
func runOutcome(action resilience.Action) string {
	switch action {
	case resilience.ActionSucceed:
		return runSucceeded
	case resilience.ActionRestart:
		return runRestarting
	case resilience.ActionRetry, resilience.ActionRequeue:
		return ""
	}
	return runDeadLettered
}

// endRunSpan writes the span of env's run, which ended with outcome after
// its attempt a (nil: none was made), with the IDs its attempts' spans
// point to (tracing.RunIDs). It starts when the run was due: its delayed
// start (restarts, delayed tasks), else the enqueue for a first run; a
// requeued run (neither) starts with its last attempt.
func (p *Executor) endRunSpan(env *tasks.Envelope, a *attemptResult, outcome, class string) {
	if outcome == "" || !p.traced {
		return
	}
	parent := tracing.Parse(env.Traceparent, env.Tracestate)
	tid, sid := tracing.RunIDs(parent, env.ID, env.EnqueuedAt, env.Run)
	now := time.Now()
	start := now
	switch {
	case env.NotBefore > 0:
		start = time.UnixMilli(env.NotBefore)
	case env.Run == 0 && !env.EnqueuedAt.IsZero():
		start = env.EnqueuedAt
	case a != nil:
		start = now.Add(-a.call.elapsed)
	}
	if start.After(now) {
		start = now
	}
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start)}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := p.tracer.Start(tracing.WithIDs(ctx, tid, sid), tracing.SpanRun, opts...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrTaskID, env.ID), attribute.String(tracing.AttrAgent, env.Agent),
			attribute.String(tracing.AttrAction, env.Action), attribute.String(tracing.AttrQueue, env.Queue),
			attribute.Int(tracing.AttrRun, env.Run), attribute.Int(tracing.AttrRestart, env.Restarts),
			attribute.String(tracing.AttrOutcome, outcome), attribute.String(tracing.AttrErrorClass, class))
		if a != nil {
			span.SetAttributes(attribute.Int(tracing.AttrAttempt, a.n))
		}
		if outcome != runSucceeded {
			span.SetStatus(codes.Error, outcome+": "+class)
		}
		if span.SpanContext().SpanID() != sid {
			p.log.Debug("tracing: the tracer provider does not use tracing.IDGenerator; run spans are not the parents of their attempts")
		}
	}
	span.End(trace.WithTimestamp(now))
}
