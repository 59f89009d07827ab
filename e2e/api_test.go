package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// apiPython returns the python3 interpreter; a missing one fails the test
// (make test's scripts/ensure-redis.sh installs it).
func apiPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 not found in PATH: the HTTP API end-to-end test runs a Python client (install python3, or run `make test`, which installs it): %v", err)
	}
	return py
}

// TestAPIPythonClient: a worker and `enqueuer serve` as real processes on a
// real redis-server, and a Python 3 client (standard library only,
// e2e/testdata/api_client.py) that enqueues tasks with the bearer token
// (one, its idempotent repeat, then a batch) and polls them over the API
// until they succeed.
func TestAPIPythonClient(t *testing.T) {
	t.Parallel()
	py := apiPython(t)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 10s
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, b.agent))
	const token = "py-api-e2e-s3cret-token"
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startEnv(t, "serve", []string{"AGENTQ_API_TOKEN=" + token}, b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	waitHTTP(t, base+"/healthz", 20*time.Second)

	const n = 6
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "api_client.py"))
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, py, script, base, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "AGENTQ_API_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "python client failed:\nstdout:\n%s\nstderr:\n%s", out, stderr.String())

	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, n+4, string(out))
	require.JSONEq(t, `{"check":"unauthorized","status":401}`, lines[0])
	require.JSONEq(t, `{"check":"idempotent","status":200}`, lines[1])
	for i := range n {
		require.JSONEq(t, fmt.Sprintf(`{"id":"py-%d","state":"succeeded","attempts":1,"result":{"mode":"echo","n":%d}}`, i, i), lines[2+i])
	}
	require.JSONEq(t, `{"agents":["tool:healthy"]}`, lines[n+2])
	require.Equal(t, fmt.Sprintf("done %d", n), lines[n+3])

	// The store agrees, and the batch's correlation ID travelled.
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("py-%d", i)
	}
	views := waitStates(t, rdb, ids, 10*time.Second)
	for _, id := range ids {
		require.Equal(t, tasks.StateSucceeded, views[id].State, id)
	}
	require.Equal(t, "py-batch", views["py-1"].CorrelationID)
	var res map[string]any
	require.NoError(t, json.Unmarshal(views["py-3"].Result, &res))
	require.EqualValues(t, 3, res["n"])

	require.Equal(t, 0, serve.stop(t, 15*time.Second), "enqueuer serve exits 0 on SIGTERM")
}
