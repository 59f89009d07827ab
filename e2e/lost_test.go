package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestKilledWorkerLeavesATrace (#39 item 6): a worker is SIGKILLed while
// its task's attempt runs; asynq's lease recovery redelivers the run to
// another worker, which finishes it. The task's history says what
// happened — queued, interrupted (lost, with the killed worker and the
// lost attempt), succeeded (attempt 2) — and so does an event stream
// opened before the kill, the interrupted event before the success.
func TestKilledWorkerLeavesATrace(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 10m
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, b.agent))
	addr := freeAddr(t)
	base := "http://" + addr
	start(t, "serve", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	w1 := start(t, "worker-1", b.worker, "--config", cfg, "--redis", srv.URL())
	waitHTTP(t, base+"/healthz", 20*time.Second)

	// The first call hangs; the second succeeds (the agent counts calls).
	const id = "lost-1"
	dir := t.TempDir()
	body := `{"id":"` + id + `","agent":"tool","params":{"mode":"hang","children":0,"times":1,"state_dir":"` + dir + `"}}`
	resp, err := http.Post(base+"/api/v1/tasks", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	stream := getStream(t, base+"/api/v1/tasks/"+id+"/events", "")
	defer func() { _ = stream.Body.Close() }()
	streamed := make(chan []sse, 1)
	go func() {
		var got []sse
		_ = readSSE(stream.Body, func(ev sse) bool { got = append(got, ev); return ev.event == "succeeded" })
		streamed <- got
	}()

	st := tasks.NewStore(rdb)
	poll(t, 30*time.Second, "the first attempt to be active, its call counted", func() bool {
		v, err := st.Get(ctx, id)
		calls, _ := os.ReadFile(filepath.Join(dir, "testagent-calls-"+id))
		return err == nil && v.State == tasks.StateActive && string(calls) == "1"
	})
	w1.signal(syscall.SIGKILL)
	<-w1.done
	host, err := os.Hostname()
	require.NoError(t, err)
	lostWorker := fmt.Sprintf("%s:%d", host, w1.cmd.Process.Pid)

	expireLease(t, rdb, id) // asynq's recoverer (at worker 2's start) takes it back now, not in a minute or two
	start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	v := waitStates(t, rdb, []string{id}, 60*time.Second)[id]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	require.Equal(t, 2, v.Attempts)

	evs, _, err := record.StoreOf(st).Events(ctx, id, 0)
	require.NoError(t, err)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Event)
	}
	require.Equal(t, []string{"queued", "interrupted", "succeeded"}, kinds)
	lost := evs[1]
	require.True(t, lost.Lost, "%+v", lost)
	require.Equal(t, record.ReasonWorkerLost, lost.Reason)
	require.Equal(t, lostWorker, lost.Worker, "the killed worker")
	require.Equal(t, 1, lost.Attempt, "the lost attempt")
	require.Equal(t, 2, evs[2].Attempt)
	require.NotEqual(t, lostWorker, evs[2].Worker, "another worker finished it")

	var got []sse
	select {
	case got = <-streamed:
	case <-time.After(30 * time.Second):
		t.Fatal("the event stream did not end with the success")
	}
	var streamedKinds []string
	for _, ev := range got {
		streamedKinds = append(streamedKinds, ev.event)
		if ev.event == "interrupted" {
			var e record.Event
			require.NoError(t, json.Unmarshal([]byte(ev.data), &e))
			require.True(t, e.Lost)
			require.Equal(t, lostWorker, e.Worker)
		}
	}
	require.Equal(t, []string{"queued", "interrupted", "succeeded"}, streamedKinds, "the stream shows the lost attempt before the success")
}

// TestRecoveredRunReadsPending (#39 item 7): a SIGKILLed worker's run,
// taken back by asynq's lease recovery while its queue is paused, waits on
// its queue: its record says pending (with the lost attempt's event), not
// active, and the Workers view no longer lists it under the dead worker.
// Once the queue resumes, another worker runs it; the history holds one
// interrupted event.
func TestRecoveredRunReadsPending(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  timeout: 10m
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, b.agent))
	w1 := start(t, "worker-1", b.worker, "--config", cfg, "--redis", srv.URL())
	const id = "recovered-1"
	dir := t.TempDir()
	_, errOut, code := run(t, "", b.enqueuer, "--redis", srv.URL(), "--agent", "tool", "--id", id,
		"--params", `{"mode":"hang","children":0,"times":1,"state_dir":"`+dir+`"}`)
	require.Equal(t, 0, code, errOut)
	st := tasks.NewStore(rdb)
	poll(t, 30*time.Second, "the first attempt to be active, its call counted", func() bool {
		v, err := st.Get(ctx, id)
		calls, _ := os.ReadFile(filepath.Join(dir, "testagent-calls-"+id))
		return err == nil && v.State == tasks.StateActive && string(calls) == "1"
	})
	poll(t, 30*time.Second, "worker 1's heartbeat to list the task", func() bool {
		out, _, _ := run(t, "", b.inspector, "--redis", srv.URL(), "workers", "--json")
		return strings.Contains(out, id)
	})
	w1.signal(syscall.SIGKILL)
	<-w1.done

	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "queue", "pause", "default")
	require.Equal(t, 0, code, errOut)
	expireLease(t, rdb, id)
	start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
	poll(t, 60*time.Second, "the recovered run's record to say pending", func() bool {
		v, err := st.Get(ctx, id)
		return err == nil && v.State == tasks.StatePending
	})
	evs, _, err := record.StoreOf(st).Events(ctx, id, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "interrupted", evs[1].Event)
	require.True(t, evs[1].Lost)
	out, errOut, code := run(t, "", b.inspector, "--redis", srv.URL(), "workers", "--json")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, id, "the dead worker no longer holds it")

	_, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "queue", "resume", "default")
	require.Equal(t, 0, code, errOut)
	v := waitStates(t, rdb, []string{id}, 60*time.Second)[id]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	evs, _, err = record.StoreOf(st).Events(ctx, id, 0)
	require.NoError(t, err)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Event)
	}
	require.Equal(t, []string{"queued", "interrupted", "succeeded"}, kinds, "one interrupted event")
}
