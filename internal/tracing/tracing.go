// Package tracing switches on OpenTelemetry traces when the standard OTLP
// environment asks for them, and carries W3C trace context through a task:
// producer → envelope (traceparent, tracestate) → worker → agent.
//
// Setup installs a real tracer provider (OTLP exporter, batch span
// processor) as the global one only when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_SDK_DISABLED is not
// "true"; otherwise it changes nothing and the global tracer stays
// OpenTelemetry's no-op. The SDK itself reads the rest of the standard
// variables (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER[_ARG], OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS, …).
//
// The worker's run span is written when the run ends, by the delivery
// that ends it, with a span ID every delivery of the run can compute
// (RunSpanContext), so that the attempts of one run — separate asynq
// deliveries, perhaps on other machines — are its children. A provider
// given to the worker must therefore be built with IDGenerator (as
// NewTracerProvider and Setup do); with another one the attempts still
// share the run's trace but their parent span is missing.
package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of agentq's spans.
const TracerName = "github.com/agentq/agentq"

// Span names.
const (
	SpanEnqueue = "agentq enqueue" // kind Producer: one per task enqueued (tasks.Client)
	SpanRun     = "agentq run"     // kind Consumer: one per run of a task (the worker)
	SpanAttempt = "agentq attempt" // kind Internal: one per attempt, child of its run
)

// Attribute keys of agentq's spans (stable).
const (
	AttrTaskID        = "agentq.task_id"
	AttrAgent         = "agentq.agent"
	AttrAction        = "agentq.action"
	AttrQueue         = "agentq.queue"
	AttrAttempt       = "agentq.attempt"
	AttrRestart       = "agentq.restart"
	AttrRun           = "agentq.run"
	AttrErrorClass    = "agentq.error_class"
	AttrBreakerState  = "agentq.breaker_state"
	AttrFallbackAgent = "agentq.fallback_agent"
	AttrOutcome       = "agentq.outcome"
	AttrDuplicate     = "agentq.duplicate"
	// AttrCostUSD is the cost of an attempt's last call, when its model
	// is priced (the config's pricing).
	AttrCostUSD = "agentq.usage.cost_usd"
)

// The OpenTelemetry GenAI semantic conventions' attributes an attempt span
// carries when its last call reported usage.
const (
	AttrGenAIInputTokens   = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens  = "gen_ai.usage.output_tokens"
	AttrGenAIRequestModel  = "gen_ai.request.model"
	AttrGenAIResponseModel = "gen_ai.response.model"
	AttrGenAISystem        = "gen_ai.system"
)

// Environment variables Setup looks at itself (the SDK reads the others).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Option configures Setup.
type Option func(*setupOptions)

type setupOptions struct {
	service string
	getenv  func(string) string
}

// WithServiceName is the service.name used when neither OTEL_SERVICE_NAME
// nor a service.name in OTEL_RESOURCE_ATTRIBUTES gives one; zero: the
// SDK's default (unknown_service:<executable>).
func WithServiceName(name string) Option { return func(o *setupOptions) { o.service = name } }

// Enabled reports whether getenv (nil: os.Getenv) asks for OTLP trace
// export: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// set, OTEL_SDK_DISABLED not "true", OTEL_TRACES_EXPORTER unset or "otlp".
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv(EnvTracesExporter)); e != "" && !strings.EqualFold(e, "otlp") {
		return false
	}
	return getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
}

// Setup installs an OTLP-exporting tracer provider as the global one when
// the environment asks for it (Enabled), and the W3C TraceContext and
// Baggage propagators; it returns the function that flushes and stops
// the provider (call it on shutdown, with a bounded context). When the
// environment does not ask for traces it installs nothing and returns a
// shutdown that does nothing: the global tracer stays the no-op one.
//
// The exporter speaks OTLP over HTTP/protobuf, or gRPC when
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or OTEL_EXPORTER_OTLP_PROTOCOL) is
// "grpc"; "http/json" is refused (the Go SDK has no JSON exporter).
func Setup(ctx context.Context, opts ...Option) (shutdown func(context.Context) error, err error) {
	o := setupOptions{getenv: os.Getenv}
	for _, f := range opts {
		f(&o)
	}
	nop := func(context.Context) error { return nil }
	if !Enabled(o.getenv) {
		return nop, nil
	}
	exp, err := newExporter(ctx, o.getenv)
	if err != nil {
		return nop, err
	}
	tp := NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(newResource(o)))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	name, proto := EnvTracesProtocol, getenv(EnvTracesProtocol)
	if proto == "" {
		name, proto = EnvProtocol, getenv(EnvProtocol)
	}
	switch strings.ToLower(strings.TrimSpace(proto)) {
	case "", "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: %s %q is not supported: want \"http/protobuf\" or \"grpc\"", name, proto)
	}
}

// newResource is the SDK's default resource (which reads OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES) with o.service as service.name when the
// environment names none.
func newResource(o setupOptions) *resource.Resource {
	res := resource.Default()
	if o.service == "" || o.getenv(EnvServiceName) != "" || strings.Contains(o.getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		return res
	}
	r, err := resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", o.service)))
	if err != nil {
		return res // a schema conflict: keep the default
	}
	return r
}

// NewTracerProvider is sdktrace.NewTracerProvider with IDGenerator (opts
// may not replace it): the provider the worker needs to write its run
// spans with the IDs their attempts point to. Tests build their in-memory
// providers with it.
func NewTracerProvider(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append(opts, sdktrace.WithIDGenerator(IDGenerator()))...)
}

// IDGenerator returns the SDK ID generator agentq's providers use: random
// IDs, except for the one span started with a context from WithIDs.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idsKey struct{}

type forcedIDs struct {
	tid trace.TraceID
	sid trace.SpanID
}

// WithIDs returns a context in which the next span started (by a provider
// with IDGenerator) gets span ID sid and, when it is a root, trace ID tid.
// Start no other span from the returned context.
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, forcedIDs{tid: tid, sid: sid})
}

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(idsKey{}).(forcedIDs); ok && f.tid.IsValid() && f.sid.IsValid() {
		return f.tid, f.sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(idsKey{}).(forcedIDs); ok && f.sid.IsValid() {
		return f.sid
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// RunIDs are the IDs of the span of one run of a task: its trace ID is
// the producer's (parent, when valid) or one derived from the task (ID
// and enqueue time, the same for every run); its span ID is derived from
// the trace ID, the task ID and the run number. Every delivery of the run
// computes the same IDs.
func RunIDs(parent trace.SpanContext, taskID string, enqueuedAt time.Time, run int) (trace.TraceID, trace.SpanID) {
	tid := parent.TraceID()
	if !tid.IsValid() {
		h := fnv.New128a()
		_, _ = h.Write([]byte(taskID))
		_, _ = h.Write([]byte(strconv.FormatInt(enqueuedAt.UnixNano(), 10)))
		h.Sum(tid[:0])
		if !tid.IsValid() {
			tid[15] = 1
		}
	}
	h := fnv.New64a()
	_, _ = h.Write(tid[:])
	_, _ = h.Write([]byte(taskID))
	_, _ = h.Write([]byte{0, byte(run), byte(run >> 8), byte(run >> 16), byte(run >> 24)})
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64())
	if !sid.IsValid() {
		sid[7] = 1
	}
	return tid, sid
}

// RunSpanContext is the span context of a run's span (see RunIDs), as the
// remote parent of its attempts: sampled when the producer's context is
// (or when there is none), with the producer's trace state.
func RunSpanContext(parent trace.SpanContext, taskID string, enqueuedAt time.Time, run int) trace.SpanContext {
	tid, sid := RunIDs(parent, taskID, enqueuedAt, run)
	flags := trace.FlagsSampled
	if parent.IsValid() {
		flags = parent.TraceFlags()
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags,
		TraceState: parent.TraceState(), Remote: true})
}

// carrier is a TextMapCarrier of the two W3C fields, without a map.
type carrier struct{ traceparent, tracestate string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Parse reads a W3C traceparent (and tracestate) into a remote span
// context; an empty or malformed traceparent gives an invalid one.
func Parse(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	c := carrier{traceparent: traceparent, tracestate: tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &c))
}

// Format writes sc as a W3C traceparent and tracestate ("" for an invalid
// sc).
func Format(sc trace.SpanContext) (traceparent, tracestate string) {
	if !sc.IsValid() {
		return "", ""
	}
	var c carrier
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), &c)
	return c.traceparent, c.tracestate
}

// Extract returns ctx with the remote span context of h's W3C traceparent
// and tracestate headers as its parent (the HTTP API's enqueue spans are
// its children); ctx as is when h has no valid traceparent.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// ExtractEnv is Extract for the TRACEPARENT and TRACESTATE environment
// variables (getenv; nil: os.Getenv), the carriers a script uses to make
// `enqueuer` a child of its own trace.
func ExtractEnv(ctx context.Context, getenv func(string) string) context.Context {
	if getenv == nil {
		getenv = os.Getenv
	}
	sc := Parse(getenv("TRACEPARENT"), getenv("TRACESTATE"))
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Active reports whether tp makes real spans: a root span it starts has a
// valid span context (an SDK provider, whether it samples or not), where
// the no-op provider, and the global one before a provider is installed,
// give an invalid one. The worker and the client ask once, when built,
// and build no span at all for an inactive provider. The probe span is
// never ended, so never exported.
func Active(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, probe := tp.Tracer(TracerName).Start(context.Background(), "agentq probe", trace.WithNewRoot())
	return probe.SpanContext().IsValid()
}
