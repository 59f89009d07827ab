package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// TestQueuePauseHoldsAndResumes (#30, on real processes): with two
// workers, `inspector queue pause held` holds the queue's tasks: none of
// them reaches the agent for 10 s while the other queue's tasks run; they
// stay pending (listed by `inspector tasks`); after `inspector queue
// resume held` they all run.
func TestQueuePauseHoldsAndResumes(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	be := newSwitchBackend(t, 0)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s, queues: {held: 1, free: 1}}
defaults: {timeout: 5s}
agents:
  slow: {http: {url: %q}, queue: held}
  fast: {http: {url: %q}, queue: free}
`, be.srv.URL+"/v1/held", be.srv.URL+"/v1/free"))
	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "queue", "pause", "held")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "paused")
	for i := range 2 {
		ops := freeAddr(t)
		start(t, fmt.Sprintf("worker%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
		waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	}
	enqueue := func(agent, prefix string, n int) []string {
		var lines, ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			ids = append(ids, id)
			lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":%q}`, id, agent))
		}
		_, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--file", "-")
		require.Equal(t, 0, code, errOut)
		return ids
	}
	held := enqueue("slow", "slow", 5)
	calls := func(prefix string) int {
		n := 0
		for _, c := range be.snapshot() {
			if strings.HasPrefix(c.task, prefix) {
				n++
			}
		}
		return n
	}
	// The other queue runs while held is paused: a first batch now, then
	// batches through the 10 s hold; the held queue starts nothing.
	holdEnd := time.Now().Add(10 * time.Second)
	batch := 0
	for time.Now().Before(holdEnd) {
		fast := enqueue("fast", fmt.Sprintf("fast%d", batch), 3)
		waitStates(t, srv.Client(), fast, 20*time.Second)
		require.Zero(t, calls("slow-"), "a task of the paused queue started")
		batch++
		time.Sleep(200 * time.Millisecond) // the hold window is the one timing this test checks
	}
	require.Zero(t, calls("slow-"), "a task of the paused queue started within 10 s")
	require.GreaterOrEqual(t, calls("fast"), 3)
	out, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "tasks", "--queue", "held", "--state", "pending", "--json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, len(held)+1, strings.Count(out, "\n"), "the held tasks wait, pending: %s", out)
	out, _, _ = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "stats")
	require.Regexp(t, `held\s.*paused`, out)

	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "queue", "resume", "held")
	require.Equal(t, 0, code, errOut)
	views := waitStates(t, srv.Client(), held, 30*time.Second)
	for _, id := range held {
		require.Equal(t, "succeeded", string(views[id].State), id)
	}
	require.Equal(t, len(held), calls("slow-"))
}
