package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/redistest"
)

// TestServeMetrics: the real `enqueuer serve` binary with a token serves
// GET /metrics without it, as a Prometheus scrape expects; a 401 and the
// authorized requests are counted by route pattern, method and code, and
// the build is the binary's.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	cfg := writeConfig(t, "agents:\n  tool:\n    exec: {command: [\""+b.agent+"\"], env: [PATH]}\n")
	const token = "metrics-e2e-s3cret-token"
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startEnv(t, "serve", []string{"AGENTQ_API_TOKEN=" + token}, b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	waitHTTP(t, base+"/healthz", 20*time.Second)

	code, _ := get(t, base+"/api/v1/tasks/some-task", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(t, base+"/api/v1/tasks/some-task", "Bearer "+token)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, base+"/api/v1/agents", "Bearer "+token)
	require.Equal(t, http.StatusOK, code)

	m := scrape(t, base+"/metrics")
	for s, want := range map[string]float64{
		`agentq_http_requests_total{code="401",method="GET",route="/api/v1/tasks/{id}"}`:  1,
		`agentq_http_requests_total{code="404",method="GET",route="/api/v1/tasks/{id}"}`:  1,
		`agentq_http_requests_total{code="200",method="GET",route="/api/v1/agents"}`:      1,
		`agentq_http_request_duration_seconds_count{method="GET",route="/api/v1/agents"}`: 1,
		`agentq_http_waiters_open`: 0,
		`agentq_http_streams_open`: 0,
	} {
		v, ok := m[s]
		require.True(t, ok, "%s is served", s)
		require.Equal(t, want, v, s)
	}
	build := false
	for s, v := range m {
		require.NotContains(t, s, "some-task", "no task ID in a label")
		if strings.HasPrefix(s, buildinfo.MetricName+"{") {
			require.Contains(t, s, `version="`+buildinfo.Version()+`"`)
			require.Equal(t, 1.0, v)
			build = true
		}
	}
	require.True(t, build, "agentq_build_info is served")
	require.Contains(t, m, "process_resident_memory_bytes", "the process collector, as the worker's")
	require.Equal(t, 0, serve.stop(t, 15*time.Second))
}
