package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// TestScheduleOncePerTickAcrossWorkers: a schedule "@every 2s" in the
// config of three worker processes fires once per tick over 30 s: the
// record holds one task per tick with no gap between the first and the
// last, each enqueued once and run once by the backend.
func TestScheduleOncePerTickAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newBackend(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker:
  concurrency: 4
  shutdown_timeout: 5s
agents:
  api:
    http: {url: %q}
schedules:
  beat: {cron: "@every 2s", agent: api, action: beat, params: {n: 1}}
`, be.srv.URL+"/ok"))
	ops := make([]string, 3)
	for i := range ops {
		ops[i] = freeAddr(t)
		start(t, fmt.Sprintf("worker%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops[i])
	}
	ctx := context.Background()
	ticks := func() []string {
		keys, err := rdb.Keys(ctx, rkeys.Task("sched:beat:*")).Result()
		require.NoError(t, err)
		ids := make([]string, 0, len(keys))
		for _, k := range keys {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(k, rkeys.Prefix+"{task:"), "}"))
		}
		sort.Strings(ids)
		return ids
	}
	// 16 ticks span 30 s.
	require.Eventually(t, func() bool { return len(ticks()) >= 16 }, 120*time.Second, 200*time.Millisecond,
		"the schedule fired fewer than 16 ticks")
	ids := ticks()
	views := waitStates(t, rdb, ids, 60*time.Second)

	store := tasks.NewStore(rdb)
	var prev time.Time
	for i, id := range ids {
		at, err := time.Parse("20060102T150405Z", strings.TrimPrefix(id, "sched:beat:"))
		require.NoError(t, err, id)
		require.Zero(t, at.Unix()%2, "%s is not on a 2 s tick", id)
		if i > 0 {
			require.Equal(t, 2*time.Second, at.Sub(prev), "a tick is missing between %s and %s", ids[i-1], id)
		}
		prev = at
		require.Equal(t, tasks.StateSucceeded, views[id].State, id)
		require.Equal(t, 1, be.count("/ok", id), "%s ran %d times", id, be.count("/ok", id))
		hist, err := store.History(ctx, id)
		require.NoError(t, err)
		enq := 0
		for _, ev := range hist {
			if ev.Event == "queued" {
				enq++
			}
		}
		require.Equal(t, 1, enq, "%s was queued %d times", id, enq)
	}
	// The workers' own count: fired once per tick, fleet-wide (read until
	// no tick lands between two readings).
	require.Eventually(t, func() bool {
		before := firedTicks(t, ops)
		n := len(ticks())
		return firedTicks(t, ops) == before && before == n
	}, 30*time.Second, 100*time.Millisecond, "the workers' fired ticks are not one per tick")

	st, err := rdb.HGetAll(ctx, rkeys.Schedule("beat")).Result()
	require.NoError(t, err)
	require.Contains(t, st["last_task"], "sched:beat:")
}

// firedTicks sums agentq_schedule_ticks_total{outcome="fired"} over the
// workers' /metrics.
func firedTicks(t *testing.T, ops []string) int {
	t.Helper()
	total := 0
	for _, o := range ops {
		resp, err := http.Get("http://" + o + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `agentq_schedule_ticks_total{outcome="fired",schedule="beat"}`) {
				n, err := strconv.Atoi(strings.TrimSpace(line[strings.LastIndex(line, " "):]))
				require.NoError(t, err, line)
				total += n
			}
		}
	}
	return total
}
