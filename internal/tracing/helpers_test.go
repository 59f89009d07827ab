package tracing_test

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/tracing"
)

func otelTracer() trace.Tracer { return otel.Tracer(tracing.TracerName) }
