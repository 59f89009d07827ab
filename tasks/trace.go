package tasks

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/tracing"
)

// WithTracerProvider makes the client trace its enqueues with tp; zero:
// the global provider (otel.GetTracerProvider: a no-op unless the
// program, or the commands' internal/tracing.Setup, installed one). Each
// task enqueued gets a
// span (tracing.SpanEnqueue, kind Producer, a child of the span of the
// caller's context), whose W3C context the task's envelope carries to the
// worker. The provider is asked once whether it is tracing.Active; one
// that is not (no-op) starts no span, and the caller's own span context,
// if any, is carried instead.
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return clientOption(func(c *Client) {
		if tp != nil {
			c.tracer, c.traced = tp.Tracer(tracing.TracerName), tracing.Active(tp)
		}
	})
}

// traceDefault sets c's tracer to the global provider's, as it is now
// (tracing.Setup runs before the commands build their clients).
func (c *Client) traceDefault() {
	tp := otel.GetTracerProvider()
	c.tracer, c.traced = tp.Tracer(tracing.TracerName), tracing.Active(tp)
}

// startEnqueueSpan starts the producer span of env's enqueue and writes its
// context (or, when it is not recording, the caller's: a no-op span carries
// its parent's) into env.
func (c *Client) startEnqueueSpan(ctx context.Context, env *Envelope) (context.Context, trace.Span) {
	if !c.traced {
		carryCaller(ctx, env)
		return ctx, nil
	}
	ctx, span := c.tracer.Start(ctx, tracing.SpanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
	traceEnvelope(span, env)
	return ctx, span
}

// carryCaller writes the caller's span context (ctx's), if any, into env:
// what a task carries when the client does not trace.
func carryCaller(ctx context.Context, env *Envelope) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		env.Traceparent, env.Tracestate = tracing.Format(sc)
	}
}

// traceEnvelope writes span's context into env and, when span records,
// env's identity into span.
func traceEnvelope(span trace.Span, env *Envelope) {
	if sc := span.SpanContext(); sc.IsValid() {
		env.Traceparent, env.Tracestate = tracing.Format(sc)
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrTaskID, env.ID), attribute.String(tracing.AttrAgent, env.Agent),
			attribute.String(tracing.AttrAction, env.Action), attribute.String(tracing.AttrQueue, env.Queue))
	}
}

// endEnqueueSpan ends an enqueue's span with its result.
func endEnqueueSpan(span trace.Span, res Result, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.Bool(tracing.AttrDuplicate, res.Duplicate))
		}
	}
	span.End()
}

// startBatchSpans starts one enqueue span per task of a batch and writes
// each one's context into its envelope. When the tracer does not record,
// no span is kept (nil) and every envelope carries the caller's context.
func (c *Client) startBatchSpans(ctx context.Context, items []batchItem) []trace.Span {
	if len(items) == 0 {
		return nil
	}
	if !c.traced {
		for i := range items {
			carryCaller(ctx, items[i].env)
		}
		return nil
	}
	_, first := c.tracer.Start(ctx, tracing.SpanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
	if !first.IsRecording() {
		first.End()
		if sc := first.SpanContext(); sc.IsValid() {
			tp, ts := tracing.Format(sc)
			for i := range items {
				items[i].env.Traceparent, items[i].env.Tracestate = tp, ts
			}
		}
		return nil
	}
	spans := make([]trace.Span, len(items))
	spans[0] = first
	traceEnvelope(first, items[0].env)
	for i := 1; i < len(items); i++ {
		_, spans[i] = c.tracer.Start(ctx, tracing.SpanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
		traceEnvelope(spans[i], items[i].env)
	}
	return spans
}

// endBatchSpans ends the spans of startBatchSpans with each task's result:
// an error for the tasks err names (a *BatchError), or for all.
func endBatchSpans(spans []trace.Span, results []Result, err error) {
	if spans == nil {
		return
	}
	failed := map[int]error{}
	var be *BatchError
	if errors.As(err, &be) {
		for _, f := range be.Failed {
			failed[f.Index] = f
		}
	} else if err != nil {
		for i := range spans {
			failed[i] = err
		}
	}
	for i, span := range spans {
		var res Result
		if i < len(results) {
			res = results[i]
		}
		endEnqueueSpan(span, res, failed[i])
	}
}
