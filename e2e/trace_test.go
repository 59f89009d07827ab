package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/tasks"
)

// otlpSpan is a span as the OTLP receiver got it.
type otlpSpan struct {
	service, name, traceID, spanID, parentID string
	attrs                                    map[string]string
}

// otlpReceiver is a local OTLP/HTTP collector: it accepts POST /v1/traces
// (protobuf, gzip or not) and keeps the spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(io.LimitReader(body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) add(msg *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					switch v := kv.GetValue().GetValue().(type) {
					case *commonpb.AnyValue_StringValue:
						attrs[kv.GetKey()] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						attrs[kv.GetKey()] = fmt.Sprint(v.IntValue)
					case *commonpb.AnyValue_BoolValue:
						attrs[kv.GetKey()] = fmt.Sprint(v.BoolValue)
					}
				}
				r.spans = append(r.spans, otlpSpan{service: service, name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()),
					spanID: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId()), attrs: attrs})
			}
		}
	}
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// traceAgent is an HTTP agent that fails each task's first call (503) and
// records the traceparent header of every call, by task.
type traceAgent struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string][]string
}

func newTraceAgent(t *testing.T) *traceAgent {
	t.Helper()
	a := &traceAgent{calls: map[string][]string{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			TaskID      string `json:"task_id"`
			Traceparent string `json:"traceparent"`
		}
		_ = json.NewDecoder(req.Body).Decode(&body)
		a.mu.Lock()
		a.calls[body.TaskID] = append(a.calls[body.TaskID], req.Header.Get("traceparent"))
		n := len(a.calls[body.TaskID])
		a.mu.Unlock()
		if body.Traceparent != req.Header.Get("traceparent") {
			http.Error(w, `{"error":"body and header traceparent differ"}`, http.StatusBadRequest)
			return
		}
		if n == 1 {
			http.Error(w, `{"error":"backend busy"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *traceAgent) headers(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls[id]...)
}

// TestTraceEndToEnd: W3C trace context travels from three producers —
// the Go client in a traced context, `enqueuer serve` given a traceparent
// header, `enqueuer` given TRACEPARENT — through Redis to a worker process
// exporting OTLP/HTTP to a local receiver, and on to an HTTP agent. Each
// task fails once and then succeeds. The agent must receive the producer's
// trace ID on both calls, and the receiver the worker's run span (child of
// the enqueue span) and two attempt spans (children of the run) in that
// trace, plus the API's and the enqueuer's own enqueue spans.
func TestTraceEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	recv := newOTLPReceiver(t)
	ag := newTraceAgent(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
agents:
  llm:
    http: {url: %q}
    retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 100ms}
    circuit_breaker: {failure_threshold: 10}
`, ag.srv.URL+"/v1/chat"))
	otel := func(service string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
			"OTEL_SERVICE_NAME=" + service, "OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_PROTOCOL="}
	}
	addr := freeAddr(t)
	startEnv(t, "serve", otel("e2e-api"), b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	worker := startEnv(t, "worker", otel("e2e-worker"), b.worker, "--config", cfg, "--redis", srv.URL())
	waitHTTP(t, "http://"+addr+"/healthz", 20*time.Second)

	// 1. The Go client, in a traced context.
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, caller := tp.Tracer("e2e").Start(context.Background(), "caller")
	_, err := tasks.NewClient(rdb, tasks.WithTracerProvider(tp)).Enqueue(ctx, tasks.Task{ID: "tr-client", Agent: "llm", Action: "chat"})
	require.NoError(t, err)
	caller.End()
	clientTrace := caller.SpanContext().TraceID().String()
	var enqSpan string
	for _, s := range exp.GetSpans() {
		if s.Name == tracing.SpanEnqueue {
			enqSpan = s.SpanContext.SpanID().String()
		}
	}
	require.NotEmpty(t, enqSpan)

	// 2. The HTTP API, with a traceparent header.
	const apiTrace, apiParent = "11111111111111111111111111111111", "2222222222222222"
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/tasks", strings.NewReader(`{"id":"tr-api","agent":"llm"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+apiTrace+"-"+apiParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// 3. enqueuer, with TRACEPARENT in its environment.
	const cliTrace, cliParent = "33333333333333333333333333333333", "4444444444444444"
	cmdCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "llm", "--id", "tr-cli")
	cmd.Env = append(append(os.Environ(), otel("e2e-enqueuer")...), "TRACEPARENT=00-"+cliTrace+"-"+cliParent+"-01")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	ids := []string{"tr-client", "tr-api", "tr-cli"}
	traces := map[string]string{"tr-client": clientTrace, "tr-api": apiTrace, "tr-cli": cliTrace}
	for id, v := range waitStates(t, rdb, ids, 60*time.Second) {
		require.Equal(t, tasks.StateSucceeded, v.State, id)
		require.Equal(t, 2, v.Attempts, id)
	}

	// The agent got the producer's trace on both calls of every task.
	for _, id := range ids {
		hs := ag.headers(id)
		require.Len(t, hs, 2, id)
		for _, h := range hs {
			sc := tracing.Parse(h, "")
			require.True(t, sc.IsValid(), "task %s: traceparent %q", id, h)
			require.Equal(t, traces[id], sc.TraceID().String(), "task %s: the agent is in the producer's trace", id)
		}
	}

	// The receiver got the worker's spans in those traces, and the
	// producers' enqueue spans.
	type tree struct {
		run      *otlpSpan
		attempts []otlpSpan
		enqueue  *otlpSpan
	}
	collect := func() map[string]*tree {
		m := map[string]*tree{}
		for _, s := range recv.all() {
			id := s.attrs[tracing.AttrTaskID]
			if m[id] == nil {
				m[id] = &tree{}
			}
			switch s.name {
			case tracing.SpanRun:
				m[id].run = &s
			case tracing.SpanAttempt:
				m[id].attempts = append(m[id].attempts, s)
			case tracing.SpanEnqueue:
				m[id].enqueue = &s
			}
		}
		return m
	}
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]*tree
	for {
		got = collect()
		ready := got["tr-api"] != nil && got["tr-api"].enqueue != nil && got["tr-cli"] != nil && got["tr-cli"].enqueue != nil
		for _, id := range ids {
			ready = ready && got[id] != nil && got[id].run != nil && len(got[id].attempts) == 2
		}
		if ready {
			break
		}
		require.True(t, time.Now().Before(deadline), "the receiver did not get every span within 30s: %+v", recv.all())
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range ids {
		tr := got[id]
		require.Equal(t, "e2e-worker", tr.run.service)
		require.Equal(t, traces[id], tr.run.traceID, id)
		require.Equal(t, "succeeded", tr.run.attrs[tracing.AttrOutcome], id)
		seen := map[string]bool{}
		for _, a := range tr.attempts {
			require.Equal(t, traces[id], a.traceID, id)
			require.Equal(t, tr.run.spanID, a.parentID, "%s: an attempt is a child of its run", id)
			seen[a.attrs[tracing.AttrAttempt]+"/"+a.attrs[tracing.AttrErrorClass]] = true
		}
		require.Len(t, seen, 2, id)
		require.True(t, seen["2/"], "%s: attempt 2 succeeded: %v", id, seen)
		// The agent got each attempt span's own context.
		for _, h := range ag.headers(id) {
			found := false
			for _, a := range tr.attempts {
				found = found || tracing.Parse(h, "").SpanID().String() == a.spanID
			}
			require.True(t, found, "%s: traceparent %s names no attempt span", id, h)
		}
	}
	require.Equal(t, enqSpan, got["tr-client"].run.parentID, "the run is a child of the client's enqueue span")
	for id, parent := range map[string]string{"tr-api": apiParent, "tr-cli": cliParent} {
		enq := got[id].enqueue
		require.Equal(t, parent, enq.parentID, "%s: the enqueue span is a child of the caller's", id)
		require.Equal(t, traces[id], enq.traceID)
		require.Equal(t, enq.spanID, got[id].run.parentID, "%s: the run is a child of the enqueue span", id)
	}
	require.Equal(t, "e2e-api", got["tr-api"].enqueue.service)
	require.Equal(t, "e2e-enqueuer", got["tr-cli"].enqueue.service)
	require.Equal(t, 0, worker.stop(t, 20*time.Second))
}
