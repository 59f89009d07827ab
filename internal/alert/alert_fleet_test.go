package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// fleetAlerter is an alerter counting in rdb on the fake clock clk, as one
// worker process of a fleet would (each has its own Redis client).
func fleetAlerter(t *testing.T, srv *redistest.Server, clk *fakeClock, lh *alertLog, threshold int, window time.Duration, webhook string) *Alerter {
	a := newAlerterT(srv.Client(), threshold, window, webhook, slog.New(lh))
	a.now, a.scriptNow = clk.now, clk.now
	a.retryWait = 10 * time.Millisecond
	return a
}

// TestAlerterFleetWide (issue #11, item 17): several workers, each seeing
// fewer failures than the threshold in a window but together more, raise
// exactly one alert (one log line, one metric, one webhook POST); more
// failures in the same window raise nothing more; the next window raises
// once again. Failures arrive concurrently from every worker.
func TestAlerterFleetWide(t *testing.T) {
	t.Parallel()
	const (
		workers   = 4
		threshold = 10
		window    = time.Minute
	)
	srv := redistest.Start(t)
	wh := newWebhook(t, http.StatusOK)
	clk := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)} // a window start
	lh := &alertLog{alerts: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var as []*Alerter
	for range workers {
		a := fleetAlerter(t, srv, clk, lh, threshold, window, wh.srv.URL)
		a.Start(ctx)
		as = append(as, a)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			for _, a := range as {
				a.Stop()
			}
		}
	}
	t.Cleanup(stop)
	fail := func(each int, agent string) {
		var wg sync.WaitGroup
		for _, a := range as {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					a.Failure(agent)
				}
			}()
		}
		wg.Wait()
	}
	metricSum := func(agent string) int {
		n := 0
		for _, a := range as {
			n += alertMetric(t, a, agent)
		}
		return n
	}

	fail(3, "llm") // 12 in the window, 3 per worker (< threshold each)
	require.Equal(t, 1, lh.count("llm"), "one alert log line for the fleet")
	require.Equal(t, 1, metricSum("llm"), "agentq_alerts_total summed over the fleet")
	require.Eventually(t, func() bool { return wh.calls.Load() == 1 }, 10*time.Second, 5*time.Millisecond)

	clk.advance(30 * time.Second)
	fail(5, "llm") // 32 in the same window
	require.Equal(t, 1, lh.count("llm"), "no second alert in the same window")

	fail(3, "tool") // agents are counted apart: 12 failures of tool raise its own alert
	require.Equal(t, 1, lh.count("tool"))

	clk.advance(30 * time.Second) // the next window
	fail(2, "llm")                // 8: below the threshold
	require.Equal(t, 1, lh.count("llm"))
	fail(1, "llm") // 12
	require.Equal(t, 2, lh.count("llm"), "one alert in the next window")
	require.Equal(t, 2, metricSum("llm"))

	require.Eventually(t, func() bool { return wh.calls.Load() == 4-1 }, 10*time.Second, 5*time.Millisecond)
	stop()
	require.EqualValues(t, 3, wh.calls.Load(), "one POST per alert: llm twice, tool once")
	wh.mu.Lock()
	defer wh.mu.Unlock()
	for _, b := range wh.bodies {
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got), string(b))
		require.EqualValues(t, threshold, got["failures"], "the fleet's count when the alert was raised")
	}
}

// TestAlerterFleetRedisTime: without an injected clock the window is
// Redis's (TIME), aligned to the epoch, and the hash expires.
func TestAlerterFleetRedisTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const window = time.Hour
	lh := &alertLog{alerts: map[string]int{}}
	a := newAlerterT(rdb, 2, window, "", slog.New(lh))
	before, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	a.Failure("llm")
	a.Failure("llm")
	after, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, 1, lh.count("llm"))
	h, err := rdb.HGetAll(ctx, rkeys.AlertWindow("llm")).Result()
	require.NoError(t, err)
	require.Equal(t, "2", h["count"])
	start, err := strconv.ParseInt(h["start"], 10, 64)
	require.NoError(t, err)
	w := window.Milliseconds()
	require.Contains(t, []int64{before.UnixMilli() - before.UnixMilli()%w, after.UnixMilli() - after.UnixMilli()%w}, start)
	ttl, err := rdb.PTTL(ctx, rkeys.AlertWindow("llm")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, window)
	require.LessOrEqual(t, ttl, 2*window)
}

// TestAlerterFleetFallback: while Redis cannot be reached, alerts are
// counted per process (with the failures seen before the outage), not
// dropped; the switch is logged both ways and fleet counting resumes.
func TestAlerterFleetFallback(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)}
	var buf syncBuffer
	lh := &alertLog{alerts: map[string]int{}}
	a := newAlerterT(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond}),
		3, time.Minute, "", slog.New(teeHandler{lh, slog.NewTextHandler(&buf, nil)}))
	t.Cleanup(func() { _ = a.rdb.Close() })
	a.now, a.scriptNow = clk.now, clk.now

	a.Failure("llm")
	a.Failure("llm")
	srv.Stop()
	a.Failure("llm") // third in this process's window: raised per process
	require.Equal(t, 1, lh.count("llm"), "the alert is raised without Redis")
	a.Failure("llm")
	require.Equal(t, 1, lh.count("llm"), "once per window per process")
	require.Equal(t, 1, strings.Count(buf.String(), "alert counting falls back to this worker process"), buf.String())
	require.Contains(t, buf.String(), `counted=process`)

	srv.Restart() // empty: nothing was persisted
	clk.advance(time.Minute)
	for range 3 {
		a.Failure("llm")
	}
	require.Equal(t, 2, lh.count("llm"))
	require.Contains(t, buf.String(), "alert counting is fleet-wide again")
	require.Contains(t, buf.String(), `counted=fleet`)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// teeHandler sends each record to both handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(as), h.b.WithAttrs(as)}
}
func (h teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{h.a.WithGroup(g), h.b.WithGroup(g)}
}
func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = h.a.Handle(ctx, r.Clone())
	return h.b.Handle(ctx, r)
}

// Environment of the alerter helper process (TestAlerterHelperProcess).
const (
	helperEnv  = "AGENTQ_TEST_ALERTER_HELPER" // redis address
	helperHook = "AGENTQ_TEST_ALERTER_WEBHOOK"
	helperNow  = "AGENTQ_TEST_ALERTER_NOW" // ms
	helperN    = "AGENTQ_TEST_ALERTER_FAILURES"
)

// TestAlerterHelperProcess is not a test: run by TestAlerterFleetProcesses
// as a separate process, it is one worker's alerter. It counts its
// failures, prints "counted", and holds its webhook sender until stdin
// closes.
func TestAlerterHelperProcess(t *testing.T) {
	addr := os.Getenv(helperEnv)
	if addr == "" {
		return
	}
	now, err := strconv.ParseInt(os.Getenv(helperNow), 10, 64)
	require.NoError(t, err)
	n, err := strconv.Atoi(os.Getenv(helperN))
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	a := newAlerterT(rdb, 10, time.Minute, os.Getenv(helperHook), slog.New(slog.NewTextHandler(os.Stderr, nil)))
	a.scriptNow = func() time.Time { return time.UnixMilli(now) }
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	for range n {
		a.Failure("llm")
	}
	fmt.Println("counted")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	a.Stop()
}

// TestAlerterFleetProcesses (issue #11, item 17, across processes): three
// worker processes (this test binary run again as
// TestAlerterHelperProcess), each seeing 4 failures of an agent
// (threshold 10), raise exactly one webhook POST together.
func TestAlerterFleetProcesses(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	wh := newWebhook(t, http.StatusOK)
	now := time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC).UnixMilli()
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *syncBuffer
	}
	var procs []proc
	for range 3 {
		p := proc{cmd: exec.Command(os.Args[0], "-test.run=^TestAlerterHelperProcess$", "-test.count=1"), out: &syncBuffer{}}
		p.cmd.Env = append(os.Environ(), helperEnv+"="+srv.Addr, helperHook+"="+wh.srv.URL,
			helperNow+"="+strconv.FormatInt(now, 10), helperN+"=4")
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		var err error
		p.in, err = p.cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, p.cmd.Start())
		t.Cleanup(func() {
			_ = p.in.Close()
			_ = p.cmd.Wait()
		})
		procs = append(procs, p)
	}
	rdb := srv.Client()
	require.Eventually(t, func() bool {
		n, err := rdb.HGet(context.Background(), rkeys.AlertWindow("llm"), "count").Int()
		return err == nil && n == 12
	}, 60*time.Second, 10*time.Millisecond, "the three processes counted 12 failures")
	require.Eventually(t, func() bool { return wh.calls.Load() >= 1 }, 20*time.Second, 5*time.Millisecond,
		"no webhook POST from the fleet")
	for _, p := range procs {
		require.NoError(t, p.in.Close())
		require.NoError(t, p.cmd.Wait(), p.out.String())
		require.Contains(t, p.out.String(), "counted")
	}
	require.EqualValues(t, 1, wh.calls.Load(), "one POST for the fleet")
}
