package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentq/agentq/internal/buildinfo"
)

// The names of the series GET /metrics serves (besides agentq_build_info
// and the go_* and process_* ones).
const (
	// MetricRequests counts the answered requests by route, method and
	// status code.
	MetricRequests = "agentq_http_requests_total"
	// MetricDuration is the latency of the requests that are not waits or
	// event streams, by route and method.
	MetricDuration = "agentq_http_request_duration_seconds"
	// MetricWaiters is the number of waits (?wait=) open.
	MetricWaiters = "agentq_http_waiters_open"
	// MetricStreams is the number of event streams open, the console's
	// included.
	MetricStreams = "agentq_http_streams_open"
)

// RouteNone is the route label of a request that no route matches (the
// JSON 404).
const RouteNone = "none"

// MethodOther is the method label of a method that is not a standard one.
const MethodOther = "OTHER"

// routeLabels maps the mux's patterns to their route label: a route's
// path as is, the catch-all as RouteNone.
var routeLabels = map[string]string{"": RouteNone, "/": RouteNone}

// httpMetrics are the API's Prometheus series, in a registry of the
// server's own (not the global default), as the worker's are.
type httpMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	waiters  prometheus.Gauge
	streams  prometheus.Gauge
	// page serves reg in Prometheus' text format.
	page http.Handler
}

func newHTTPMetrics() *httpMetrics {
	m := &httpMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "HTTP requests answered, by route (the route table's path pattern, /ui/ for the console, none for no route), method and status code; a wait or event stream is counted when it ends.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricDuration,
			Help:    "Time to answer an HTTP request, by route and method; waits and event streams are left out (their length is the task's).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricWaiters, Help: "Waits (GET /api/v1/tasks/{id}?wait=) open now.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricStreams, Help: "Event streams (GET /api/v1/tasks/{id}/events and the console's live events) open now.",
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.waiters, m.streams, buildinfo.Collector(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.page = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// instrument wraps next (the guarded mux) with the counts: the route is
// the mux's pattern for the request, known before next runs, so that a
// refusal of the guards is counted under the route it was meant for.
func (m *httpMetrics) instrument(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		route, ok := routeLabels[pattern]
		if !ok {
			route = pattern
		}
		method := methodLabel(r.Method)
		sw := &statusWriter{ResponseWriter: rw}
		t := &tracker{m: m}
		start := time.Now()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), trackerKey{}, t)))
		m.requests.WithLabelValues(route, method, strconv.Itoa(sw.code())).Inc()
		if !t.held {
			m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		}
	})
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return MethodOther
}

// trackerKey is the request context's key of its *tracker.
type trackerKey struct{}

// tracker is one request's part in the gauges: whether it held a wait or
// a stream (then its length is no latency).
type tracker struct {
	m    *httpMetrics
	held bool
}

// holdOpen counts r as an open wait (stream false) or event stream until
// the returned func is called. A request served outside instrument (the
// console's handler on its own) counts nothing.
func holdOpen(r *http.Request, stream bool) (done func()) {
	t, ok := r.Context().Value(trackerKey{}).(*tracker)
	if !ok {
		return func() {}
	}
	t.held = true
	g := t.m.waiters
	if stream {
		g = t.m.streams
	}
	g.Inc()
	return g.Dec
}

// statusWriter records the status code a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes the wrapped writer (an event stream's writes), with
// its error: http.ResponseController.Flush calls it.
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for a handler that asks for an http.Flusher.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// Unwrap is the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status answered: 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
