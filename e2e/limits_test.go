package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// limitBackend is an HTTP backend on loopback that records when each call
// arrives and how many are in flight at once; reply, when set, may add
// headers to a call's reply (n: the call's number, from 1).
type limitBackend struct {
	srv   *httptest.Server
	delay time.Duration

	mu       sync.Mutex
	arrivals []time.Time
	replies  []time.Time // when each reply was sent
	inFlight int
	maxIn    int
	reply    func(n int, h http.Header)
}

func newLimitBackend(t *testing.T, delay time.Duration) *limitBackend {
	b := &limitBackend{delay: delay}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.arrivals = append(b.arrivals, time.Now())
		n := len(b.arrivals)
		b.inFlight++
		b.maxIn = max(b.maxIn, b.inFlight)
		reply := b.reply
		b.mu.Unlock()
		time.Sleep(b.delay)
		if reply != nil {
			reply(n, w.Header())
		}
		w.Header().Set("Content-Type", "application/json")
		b.mu.Lock()
		b.inFlight--
		b.replies = append(b.replies, time.Now())
		b.mu.Unlock()
		fmt.Fprint(w, `{"ok":true,"usage":{"total_tokens":7}}`)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// reset forgets the calls recorded so far.
func (b *limitBackend) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.arrivals, b.replies, b.maxIn = nil, nil, 0
}

func (b *limitBackend) snapshot() (arrivals, replies []time.Time, maxIn int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.arrivals...), append([]time.Time(nil), b.replies...), b.maxIn
}

// maxInWindow is the largest number of arrivals within any window of
// length per (half-open: [a, a+per)), and where that window starts.
func maxInWindow(arrivals []time.Time, per time.Duration) (int, time.Time) {
	s := append([]time.Time(nil), arrivals...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	best, at := 0, time.Time{}
	j := 0
	for i := range s {
		for j < len(s) && s[j].Sub(s[i]) < per {
			j++
		}
		if j-i > best {
			best, at = j-i, s[i]
		}
	}
	return best, at
}

// lagMonitor measures how late this process's goroutines get scheduled (a
// 5ms ticker's worst lateness) until the test ends: the backend records an
// arrival when its handler runs, which on an overloaded machine may be that
// much after the call reached it.
func lagMonitor(t *testing.T) func() time.Duration {
	var mu sync.Mutex
	var worst time.Duration
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		const every = 5 * time.Millisecond
		tick := time.NewTicker(every)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				if lag := now.Sub(last) - every; lag > 0 {
					mu.Lock()
					worst = max(worst, lag)
					mu.Unlock()
				}
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return worst
	}
}

func enqueueN(t *testing.T, b bins, redisURL, prefix string, n int) []string {
	t.Helper()
	var lines, ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		ids = append(ids, id)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"agent":"llm","action":"chat","params":{"n":%d}}`, id, i))
	}
	out, errOut, code := run(t, strings.Join(lines, "\n")+"\n", b.enqueuer, "--redis", redisURL, "--file", "-")
	require.Equal(t, 0, code, errOut)
	require.Len(t, strings.Fields(out), n)
	return ids
}

// TestLimitsFleetWide: 4 worker processes × concurrency 20 share an HTTP
// agent's limits {requests: 20, per: 1s, concurrency: 5}. On 120 tasks no
// 1-second window sees more than 20 calls start at the backend, never more
// than 5 are in flight, every task succeeds, and the throughput after the
// first burst is ≥ 90% of the limit.
func TestLimitsFleetWide(t *testing.T) {
	t.Parallel()
	const (
		nTasks   = 120
		requests = 20
		per      = time.Second
		conc     = 5
	)
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newLimitBackend(t, 60*time.Millisecond)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 20, shutdown_timeout: 5s}
defaults:
  timeout: 10s
agents:
  llm:
    http: {url: %q}
    limits: {key: loopback-llm, requests: %d, per: 1s, concurrency: %d, tokens: 100000}
`, be.srv.URL+"/v1/chat", requests, conc))

	ops := make([]string, 4)
	for i := range ops {
		ops[i] = freeAddr(t)
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops[i])
	}
	for _, o := range ops {
		waitHTTP(t, "http://"+o+"/readyz", 20*time.Second)
	}

	// Warm up: a window's worth of calls opens the workers' connections to
	// the backend, so that the measured run does not time the backend's
	// accepting new connections on a loaded machine (a call held there
	// would be recorded late, in the next window). Then wait for the
	// window to empty.
	warm := enqueueN(t, b, srv.URL(), "warm", requests)
	waitStates(t, rdb, warm, 60*time.Second)
	lim := limit.New(rdb)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := lim.Status(context.Background(), "loopback-llm")
		require.NoError(t, err)
		if st.RequestsInWindow == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the warm-up's window did not empty: %+v", st)
		time.Sleep(20 * time.Millisecond)
	}
	be.reset()
	lag := lagMonitor(t)

	ids := enqueueN(t, b, srv.URL(), "lim", nTasks)
	views := waitStates(t, rdb, ids, 90*time.Second)
	for id, v := range views {
		require.Equal(t, tasks.StateSucceeded, v.State, "task %s", id)
		require.Equal(t, 1, v.Attempts, "task %s: a limit uses no attempt", id)
	}

	arrivals, _, maxIn := be.snapshot()
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Before(arrivals[j]) })
	var timeline []string
	for i, a := range arrivals {
		timeline = append(timeline, fmt.Sprintf("%d:%d", i, a.Sub(arrivals[0]).Milliseconds()))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("arrivals (index:ms): %s", strings.Join(timeline, " "))
		}
	})
	require.Len(t, arrivals, nTasks, "one call per task")
	worst, at := maxInWindow(arrivals, per)
	if worst > requests && lag() > limit.RequestGuard(per) {
		// The backend (this test process) was itself scheduled late by more
		// than the limiter's guard: its arrival times are off by up to that
		// lag. Hold the windows to the limit within that measurement error.
		t.Logf("%d calls recorded within the 1s window from %s while this process lagged up to %s; checking windows of %s",
			worst, at.Format(time.RFC3339Nano), lag(), per-lag())
		worst, at = maxInWindow(arrivals, per-lag())
	}
	require.LessOrEqual(t, worst, requests, "calls started within the 1s window from %s", at.Format(time.RFC3339Nano))
	require.LessOrEqual(t, maxIn, conc, "calls in flight at once")

	// Throughput: the limit lets `requests` calls start at once and then
	// `requests` more per second, so the call numbered N-requests may
	// start (N-requests)/requests seconds after the first one at the
	// earliest; how close it came is the throughput. (The last window's
	// calls then start as fast as the concurrency limit and the backend's
	// latency let them, which says nothing about the request limit.) A
	// timing figure, which the issue asks to show: the limiter keeps a
	// 50ms guard per window (95% at most) and the in-worker lines take
	// freed slots within milliseconds; the 90% floor leaves the rest as
	// margin for a loaded machine.
	n := len(arrivals) - requests
	rate := float64(n) / arrivals[n].Sub(arrivals[0]).Seconds()
	t.Logf("limits: %d calls, max %d in any 1s window, max %d in flight, %.2f calls/s (%.0f%% of %d/s); all %d calls in %s",
		len(arrivals), worst, maxIn, rate, 100*rate/requests, requests, len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]).Round(time.Millisecond))
	require.GreaterOrEqual(t, rate, 0.9*requests, "throughput")

	// The limits are visible: inspector limits, /api/v1/agents, /metrics.
	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "limits", "--json")
	require.Equal(t, 0, code, errOut)
	var row struct {
		Key         string   `json:"key"`
		Requests    int      `json:"requests"`
		Per         string   `json:"per"`
		Concurrency int      `json:"concurrency"`
		InFlight    int      `json:"in_flight"`
		Tokens      int      `json:"tokens_in_window"`
		PausedUntil *string  `json:"paused_until"`
		Agents      []string `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &row), out)
	require.Equal(t, "loopback-llm", row.Key)
	require.Equal(t, requests, row.Requests)
	require.Equal(t, "1s", row.Per)
	require.Equal(t, conc, row.Concurrency)
	require.Zero(t, row.InFlight, "every lease released")
	require.Nil(t, row.PausedUntil)
	require.Equal(t, []string{"llm"}, row.Agents)

	resp, err := http.Get("http://" + ops[0] + "/api/v1/agents")
	require.NoError(t, err)
	var agents struct {
		Agents []struct {
			Agent  string `json:"agent"`
			Limits *struct {
				Key      string `json:"key"`
				Requests int    `json:"requests"`
			} `json:"limits"`
		} `json:"agents"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&agents))
	resp.Body.Close()
	require.Len(t, agents.Agents, 1)
	require.NotNil(t, agents.Agents[0].Limits)
	require.Equal(t, "loopback-llm", agents.Agents[0].Limits.Key)

	refused := 0
	for _, o := range ops {
		resp, err := http.Get("http://" + o + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `agentq_limit_refusals_total{key="loopback-llm"`) {
				refused++
			}
		}
	}
	require.Positive(t, refused, "the workers count refusals by limit in /metrics")
}

// TestLimitsProviderPause: a reply saying the key is exhausted
// (x-ratelimit-remaining-requests: 0, reset 2s) pauses the key for every
// worker: no call reaches the backend from any worker for those 2s, and
// the tasks run after it.
func TestLimitsProviderPause(t *testing.T) {
	t.Parallel()
	const reset = 2 * time.Second
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	be := newLimitBackend(t, 0)
	be.reply = func(n int, h http.Header) {
		if n == 1 {
			h.Set("x-ratelimit-remaining-requests", "0")
			h.Set("x-ratelimit-reset-requests", "2s")
		}
	}
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 10, shutdown_timeout: 5s}
defaults:
  timeout: 10s
agents:
  llm:
    http: {url: %q}
    limits: {key: paused-llm, requests: 1000, per: 1s}
`, be.srv.URL+"/v1/chat"))
	ops := make([]string, 3)
	for i := range ops {
		ops[i] = freeAddr(t)
		start(t, fmt.Sprintf("worker-%d", i), b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops[i])
	}
	for _, o := range ops {
		waitHTTP(t, "http://"+o+"/readyz", 20*time.Second)
	}

	first := enqueueN(t, b, srv.URL(), "first", 1)
	waitStates(t, rdb, first, 30*time.Second)
	_, replies, _ := be.snapshot()
	require.Len(t, replies, 1)
	exhausted := replies[0]

	// While paused: inspector limits shows it, and new tasks wait.
	out, errOut, code := run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "limits", "--json")
	require.Equal(t, 0, code, errOut)
	var row struct {
		PausedUntil *time.Time `json:"paused_until"`
		PauseReason string     `json:"pause_reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &row), out)
	if time.Since(exhausted) < reset-100*time.Millisecond { // the check itself may be slow on a loaded machine
		require.NotNil(t, row.PausedUntil, out)
		require.Contains(t, row.PauseReason, "x-ratelimit-remaining-requests")
	}

	ids := enqueueN(t, b, srv.URL(), "after", 30)
	views := waitStates(t, rdb, ids, 60*time.Second)
	for id, v := range views {
		require.Equal(t, tasks.StateSucceeded, v.State, "task %s", id)
	}
	arrivals, _, _ := be.snapshot()
	require.Len(t, arrivals, 31)
	for _, a := range arrivals[1:] {
		require.False(t, a.Before(exhausted.Add(reset)),
			"a call arrived %s after the reply that said the key was exhausted for %s", a.Sub(exhausted), reset)
	}
}

// TestLimitsKilledWorkerLease: a worker killed (SIGKILL) while its call
// holds the key's only concurrency slot gives the slot back when its lease
// ends (the agent's timeout + 5s): another worker's task waits until then,
// not longer, and never runs alongside it.
func TestLimitsKilledWorkerLease(t *testing.T) {
	t.Parallel()
	const lease = 2*time.Second + 5*time.Second // timeout + 5s
	b := buildBins(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	var mu sync.Mutex
	var arrivals []time.Time
	arrived := make(chan struct{}, 4)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		first := len(arrivals) == 1
		mu.Unlock()
		arrived <- struct{}{}
		if first { // hold the slot until the worker is killed
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(be.Close)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 4, shutdown_timeout: 5s}
defaults:
  timeout: 2s
agents:
  llm:
    http: {url: %q}
    limits: {key: one-at-a-time, concurrency: 1}
`, be.URL))
	opsA := freeAddr(t)
	a := start(t, "worker-a", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", opsA)
	waitHTTP(t, "http://"+opsA+"/readyz", 20*time.Second)
	enqueueN(t, b, srv.URL(), "held", 1)
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the first call never arrived")
	}
	a.signal(syscall.SIGKILL)
	<-a.done

	opsB := freeAddr(t)
	start(t, "worker-b", b.worker, "--config", cfg, "--redis", srv.URL(), "--http", opsB)
	waitHTTP(t, "http://"+opsB+"/readyz", 20*time.Second)
	ids := enqueueN(t, b, srv.URL(), "next", 1)
	views := waitStates(t, rdb, ids, 30*time.Second)
	require.Equal(t, tasks.StateSucceeded, views[ids[0]].State)
	require.Zero(t, views[ids[0]].Attempts-1, "waiting for the slot used no attempt")

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(arrivals), 2)
	gap := arrivals[1].Sub(arrivals[0])
	t.Logf("the killed worker's slot was taken again %s after its call arrived (lease %s)", gap.Round(time.Millisecond), lease)
	require.GreaterOrEqual(t, gap, lease-time.Second, "the slot was taken before its lease ended")
	require.LessOrEqual(t, gap, lease+4*time.Second, "the slot came back long after its lease")
}
