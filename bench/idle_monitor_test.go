package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// Knobs of TestIdleMonitor (environment variables):
//
//	AGENTQ_IDLE_MONITOR  file the MONITOR stream is written to ("none": no
//	                     MONITOR, commandstats only; unset: skipped)
//	AGENTQ_IDLE_WINDOW   how long MONITOR records (20s)

// TestIdleMonitor starts one idle worker (the default configuration, as
// BenchmarkIdleCost's) on an empty redis-server, lets it settle, records
// MONITOR (redis-cli) for the window into AGENTQ_IDLE_MONITOR, and prints
// the window's Redis CPU and commandstats per second: what each of the
// worker's loops asks of an idle Redis.
func TestIdleMonitor(t *testing.T) {
	out := envString("AGENTQ_IDLE_MONITOR")
	if out == "" {
		t.Skip("idle MONITOR harness: set AGENTQ_IDLE_MONITOR=file")
	}
	window, err := time.ParseDuration(envString("AGENTQ_IDLE_WINDOW"))
	if err != nil {
		window = 20 * time.Second
	}
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := newClient(srv)
	defer rdb.Close()
	f, err := startFleet(ctx, srv, kindAgentq, 1, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.stop()) }()
	time.Sleep(2 * time.Second) // settle: the start-up's one-off work is not idle cost

	stop := func() {}
	if out != "none" {
		stop = startMonitor(t, srv, out)
	}
	s0 := mustSnap(t, rdb)
	time.Sleep(window) // the measuring window
	s1 := mustSnap(t, rdb)
	stop()

	sec := s1.at.Sub(s0.at).Seconds()
	fmt.Printf("idle worker over %.1fs: Redis CPU %.3f ms/s (MONITOR's own cost included), commands %.1f/s\n",
		sec, (s1.cpu-s0.cpu)*1000/sec, float64(s1.cmds-s0.cmds)/sec)
	printStats(s0, s1, int(sec))
}

// startMonitor writes srv's MONITOR stream (redis-cli) to the file out
// until the returned stop.
func startMonitor(t *testing.T, srv *redistest.Server, out string) (stop func()) {
	t.Helper()
	file, err := os.Create(out)
	require.NoError(t, err)
	mon := exec.Command("redis-cli", "-u", srv.URL(), "monitor")
	mon.Stdout = file
	require.NoError(t, mon.Start())
	return func() {
		_ = mon.Process.Kill()
		_ = mon.Wait()
		_ = file.Close()
	}
}
