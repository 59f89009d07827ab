package api_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// serveWith runs the API with opts through Serve on a loopback port,
// as `enqueuer serve` does, until the test ends.
func serveWith(t *testing.T, opts api.Options) env {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	opts.Logger = slog.New(slog.DiscardHandler)
	s := api.New(rdb, testConfig(), opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return env{url: "http://" + ln.Addr().String(), srv: srv, rdb: rdb, store: tasks.NewStore(rdb)}
}

// series scrapes url's /metrics (without a token) into "name{labels}"
// → value, the labels sorted (our values hold no commas or quotes).
func series(t *testing.T, url string) map[string]float64 {
	t.Helper()
	r := do(t, http.MethodGet, url+"/metrics", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	out := map[string]float64{}
	for _, line := range strings.Split(r.body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		name := line[:i]
		if open := strings.IndexByte(name, '{'); open >= 0 {
			labels := strings.Split(name[open+1:len(name)-1], ",")
			sort.Strings(labels)
			name = name[:open] + "{" + strings.Join(labels, ",") + "}"
		}
		out[name] = v
	}
	return out
}

// requests is the series name of agentq_http_requests_total{route,method,code}.
func requests(route, method string, code int) string {
	return api.MetricRequests + `{code="` + strconv.Itoa(code) + `",method="` + method + `",route="` + route + `"}`
}

// latencies is the count series of agentq_http_request_duration_seconds{route,method}.
func latencies(route, method string) string {
	return api.MetricDuration + `_count{method="` + method + `",route="` + route + `"}`
}

// TestMetricsCountRequests: GET /metrics answers without the token; a
// request is counted by its route pattern (never the task ID), method and
// status code — 401, 429 and the guards' 403 included — and timed.
func TestMetricsCountRequests(t *testing.T) {
	t.Parallel()
	e := serveWith(t, api.Options{Token: token})
	m := series(t, e.url)
	require.Equal(t, 1.0, m[buildinfo.MetricName+`{revision="`+buildinfo.Revision()+`",version="`+buildinfo.Version()+`"}`])
	require.Contains(t, m, "go_goroutines", "the Go collector, as the worker's")

	r := do(t, http.MethodPost, e.url+"/api/v1/tasks", token, `{"id":"metric-task-7","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	require.Equal(t, http.StatusOK, do(t, http.MethodGet, e.url+"/api/v1/tasks/metric-task-7", token, "").status)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, e.url+"/api/v1/tasks/no-such-task", token, "").status)
	require.Equal(t, http.StatusUnauthorized, do(t, http.MethodGet, e.url+"/api/v1/tasks/metric-task-7", "", "").status)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, e.url+"/no/route/here", token, "").status)
	req, err := http.NewRequest(http.MethodGet, e.url+"/api/v1/agents", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, roundTrip(t, http.DefaultClient, req).status)
	// Wrong tokens until the limiter locks the address out.
	codes := map[int]int{}
	for range 11 {
		codes[do(t, http.MethodGet, e.url+"/api/v1/workers", "wrong-token-0123456789", "").status]++
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: 10, http.StatusTooManyRequests: 1}, codes)

	m = series(t, e.url)
	for s, want := range map[string]float64{
		requests("/api/v1/tasks", "POST", 202):     1,
		requests("/api/v1/tasks/{id}", "GET", 200): 1,
		requests("/api/v1/tasks/{id}", "GET", 404): 1,
		requests("/api/v1/tasks/{id}", "GET", 401): 1,
		requests(api.RouteNone, "GET", 404):        1,
		requests("/api/v1/agents", "GET", 403):     1,
		requests("/api/v1/workers", "GET", 401):    10,
		requests("/api/v1/workers", "GET", 429):    1,
		requests("/metrics", "GET", 200):           1, // the first scrape
		latencies("/api/v1/tasks/{id}", "GET"):     3,
		latencies("/api/v1/tasks", "POST"):         1,
	} {
		require.Equal(t, want, m[s], s)
	}
	for s := range m {
		require.NotContains(t, s, "metric-task-7", "no task ID in a label")
		require.NotContains(t, s, "no-such-task")
		require.NotContains(t, s, "/no/route")
	}
}

// TestMetricsGaugesFollowWaitsAndStreams: agentq_http_waiters_open is 1
// while a wait is open and 0 once it has answered; agentq_http_streams_open
// follows an event stream until its client goes; neither is timed.
func TestMetricsGaugesFollowWaitsAndStreams(t *testing.T) {
	t.Parallel()
	e := serveWith(t, api.Options{Token: token})
	r := do(t, http.MethodPost, e.url+"/api/v1/tasks", token, `{"id":"held","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	gauge := func(name string) func() float64 {
		return func() float64 { return series(t, e.url)[name] }
	}
	waiters, streams := gauge(api.MetricWaiters), gauge(api.MetricStreams)
	require.Zero(t, waiters())
	require.Zero(t, streams())

	got := make(chan reply, 1)
	go func() { got <- do(t, http.MethodGet, e.url+"/api/v1/tasks/held?wait=50s", token, "") }()
	require.Eventually(t, func() bool { return waiters() == 1 }, 10*time.Second, 10*time.Millisecond, "the wait is open")
	finish(t, e, "held", record.Succeeded(record.Attempt{Attempt: 1}, []byte(`1`)))
	require.Equal(t, "succeeded", (<-got).json["state"])
	require.Eventually(t, func() bool { return waiters() == 0 }, 10*time.Second, 10*time.Millisecond, "the wait has answered")
	m := series(t, e.url)
	require.Equal(t, 1.0, m[requests("/api/v1/tasks/{id}", "GET", 200)], "the wait is counted when it answers")
	require.Zero(t, m[latencies("/api/v1/tasks/{id}", "GET")], "…but not timed")

	r = do(t, http.MethodPost, e.url+"/api/v1/tasks", token, `{"id":"streamed","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/v1/tasks/streamed/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = bufio.NewReader(resp.Body).ReadString('\n') // the stream's opening comment
	require.NoError(t, err)
	require.Equal(t, 1.0, streams(), "the stream is open")
	cancel()
	// The gauge goes down as the stream ends, the count right after.
	require.Eventually(t, func() bool {
		m = series(t, e.url)
		return m[api.MetricStreams] == 0 && m[requests("/api/v1/tasks/{id}/events", "GET", 200)] == 1
	}, 10*time.Second, 10*time.Millisecond, "the client has gone: %v", m)
	require.Zero(t, m[latencies("/api/v1/tasks/{id}/events", "GET")], "a stream is not timed")
}
