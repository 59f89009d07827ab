package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// clientsServer starts a real redis-server, worker and `enqueuer serve` for
// a client suite, with agents written with the clients' exec-agent helpers
// (py: clients/python/tests/live_agent.py; ts: clients/typescript/test/
// live_agent.mjs; echo: the README examples' agent) and the Go testagent
// (tool). It returns the environment the suite runs with.
func clientsServer(t *testing.T, echo []string) []string {
	t.Helper()
	py := apiPython(t)
	// The interpreter itself, not a shim: exec agents get only PATH.
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	require.NoError(t, err)
	py = strings.TrimSpace(string(out))
	node := clientsNode(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	b := buildBins(t)
	srv := redistest.Start(t)
	if echo == nil {
		echo = []string{py, filepath.Join(root, "clients/python/tests/live_agent.py")}
	}
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 8, shutdown_timeout: 5s}
defaults:
  timeout: 30s
agents:
  py:
    exec: {command: [%q, %q], env: [PATH]}
  ts:
    exec: {command: [%q, %q], env: [PATH]}
  echo:
    exec: {command: [%q, %q], env: [PATH]}
  tool:
    exec: {command: [%q], env: [PATH]}
`, py, filepath.Join(root, "clients/python/tests/live_agent.py"),
		node, filepath.Join(root, "clients/typescript/test/live_agent.mjs"),
		echo[0], echo[1], b.agent))
	const token = "clients-e2e-s3cret-token"
	addr := freeAddr(t)
	startEnv(t, "serve", []string{"AGENTQ_API_TOKEN=" + token}, b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	waitHTTP(t, "http://"+addr+"/healthz", 20*time.Second)
	return append(os.Environ(), "AGENTQ_URL=http://"+addr, "AGENTQ_API_TOKEN="+token, "AGENTQ_TEST_REDIS="+srv.Addr)
}

// clientsNode returns node (>= 18); a missing one fails the test (make
// test's scripts/ensure-node.sh installs it).
func clientsNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found in PATH: the TypeScript client's tests run on Node >= 18 (run `make test`, which installs it): %v", err)
	}
	return node
}

// runSuite runs a client's test suite and fails with its output when it fails.
func runSuite(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// TestClientsPython runs clients/python/tests/test_live.py against a real
// `enqueuer serve`, worker and redis-server: enqueue → wait → result with the
// agent's progress and output, an event stream that a proxy drops and that
// resumes, cancel of a running task, a dead letter listed and requeued, a
// 503 during a Redis pause retried to success with one task created, the
// AsyncClient (200 waits and 20 event streams at once on one client, no
// thread), and the README's example — with no package installed (the
// client is on PYTHONPATH, standard library only).
func TestClientsPython(t *testing.T) {
	t.Parallel()
	env := clientsServer(t, nil)
	dir, err := filepath.Abs("../clients/python/tests")
	require.NoError(t, err)
	out := runSuite(t, dir, env, apiPython(t), "-m", "unittest", "-v", "test_live")
	require.NotContains(t, out, "skipped", out)
	require.Contains(t, out, "\nOK", out)
}

// TestClientsTypeScript runs clients/typescript/test/live.test.mjs (the
// same checks, the TypeScript client and agent helpers) against a real
// server. It needs the built client (clients/typescript/dist: `make test`
// runs npm ci and npm run build first).
func TestClientsTypeScript(t *testing.T) {
	t.Parallel()
	node := clientsNode(t)
	dir, err := filepath.Abs("../clients/typescript")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
		t.Fatalf("clients/typescript/dist is not built (run `make clients`, which `make test` runs): %v", err)
	}
	env := clientsServer(t, []string{node, filepath.Join(dir, "test/live_agent.mjs")})
	out := runSuite(t, dir, env, node, "--test", "test/live.test.mjs")
	require.Contains(t, out, "# fail 0", out)
	require.Contains(t, out, "# skipped 0", out)
}
