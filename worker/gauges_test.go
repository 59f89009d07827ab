package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// fleetGaugeNames are the families the fleet's gauges export.
var fleetGaugeNames = []string{"agentq_queue_tasks", "agentq_worker_slots", "agentq_dead_letters"}

// fleetGaugeValues are w's fleet gauges by name and labels
// ("agentq_queue_tasks default pending", "agentq_worker_slots busy",
// "agentq_dead_letters"); empty when w exports none.
func fleetGaugeValues(t *testing.T, w *Worker) map[string]float64 {
	t.Helper()
	mfs, err := w.metrics.reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += " " + lp.GetValue()
			}
			for _, name := range fleetGaugeNames {
				if name == mf.GetName() {
					out[key] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// blocking is an agent that runs until release is closed.
func blocking(release <-chan struct{}) agent.Func {
	return func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{}`), nil
	}
}

// TestFleetGauges (#39): the fleet's gauges count the work the way
// `inspector stats` does: runs of a tenant waiting in the fair-dispatch
// lanes are pending (asynq's own pending list holds at most one of the
// five waiting here), running tasks are active and busy slots, a delayed
// task is scheduled, a dead letter is counted; once the tasks end, the
// gauges say so.
func TestFleetGauges(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	w, rdb := runWorker(t, "worker: {concurrency: 2, shutdown_timeout: 2s}\ntenants:\n  acme: {weight: 1}\nagents:\n  tool: {}\n",
		WithAgent("tool", blocking(release)), withGaugesInterval(50*time.Millisecond))
	ctx := context.Background()
	c := tasks.NewClient(rdb)
	_, err := c.Enqueue(ctx, tasks.Task{ID: "stray", Agent: "no-such-agent"})
	require.NoError(t, err)
	waitTerminal(t, rdb, []string{"stray"}, 20*time.Second)
	var ids []string
	for i := range 6 {
		task := tasks.Task{ID: fmt.Sprintf("acme-%d", i), Agent: "tool", Tenant: "acme"}
		if i == 5 {
			task = tasks.Task{ID: "plain", Agent: "tool"} // the default tenant: asynq's pending list
		}
		_, err := c.Enqueue(ctx, task)
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	_, err = c.Enqueue(ctx, tasks.Task{ID: "later", Agent: "tool"}, tasks.ProcessIn(time.Hour))
	require.NoError(t, err)

	want := map[string]float64{
		"agentq_queue_tasks default pending": 4, "agentq_queue_tasks default active": 2,
		"agentq_queue_tasks default scheduled": 1, "agentq_queue_tasks default retry": 0,
		"agentq_worker_slots busy": 2, "agentq_worker_slots total": 2, "agentq_dead_letters": 1,
	}
	waitGauges(t, w, want, "two running, four waiting (three or more in acme's lanes), one delayed, one dead letter")

	close(release)
	waitTerminal(t, rdb, ids, 30*time.Second)
	want["agentq_queue_tasks default pending"], want["agentq_queue_tasks default active"] = 0, 0
	want["agentq_worker_slots busy"] = 0
	waitGauges(t, w, want, "all ended but the delayed task")
}

// waitGauges polls w's fleet gauges until they are want.
func waitGauges(t *testing.T, w *Worker, want map[string]float64, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := fleetGaugeValues(t, w)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			require.Equal(t, want, got, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFleetGaugesOneExporter (#39): of two workers of a fleet only the one
// holding the gauges' lease exports them (a sum over the workers counts
// the fleet once), with both workers' slots; when it stops, the other
// takes over and the stopped one exports nothing.
func TestFleetGaugesOneExporter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const yaml = "worker: {concurrency: 3, shutdown_timeout: 2s}\nagents:\n  tool: {}\n"
	var ws []*Worker
	var stops []func()
	for range 2 {
		w := newTestWorker(t, srv, "", yaml, WithAgent("tool", blocking(nil)), withGaugesInterval(50*time.Millisecond))
		ws, stops = append(ws, w), append(stops, runUntilStopped(t, w))
	}
	exporters := func() (n int, holder int) {
		for i, w := range ws {
			if len(fleetGaugeValues(t, w)) > 0 {
				n, holder = n+1, i
			}
		}
		return n, holder
	}
	deadline := time.Now().Add(30 * time.Second)
	for fleetGaugeValues(t, ws[0])["agentq_worker_slots total"]+fleetGaugeValues(t, ws[1])["agentq_worker_slots total"] != 6 {
		require.True(t, time.Now().Before(deadline), "the holder counts both workers' slots")
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 { // many ticks of both: never two exporters, always one
		n, _ := exporters()
		require.Equal(t, 1, n, "one worker of the fleet exports the gauges")
		time.Sleep(20 * time.Millisecond)
	}
	_, holder := exporters()
	stops[holder]()
	require.Empty(t, fleetGaugeValues(t, ws[holder]), "a stopped worker exports none")
	other := ws[1-holder]
	deadline = time.Now().Add(30 * time.Second)
	for fleetGaugeValues(t, other)["agentq_worker_slots total"] != 3 {
		require.True(t, time.Now().Before(deadline), "the other worker takes the gauges over, with its own slots only")
		time.Sleep(20 * time.Millisecond)
	}
}

// runUntilStopped runs w until the returned stop (idempotent; also at the
// test's end), which waits for Run to return.
func runUntilStopped(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var err error
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		require.NoError(t, err)
	}
	t.Cleanup(stop)
	return stop
}
