package alert

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fakeClock is a settable clock for the alerter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// alertLog counts the ERROR records with alert=true per agent.
type alertLog struct {
	mu     sync.Mutex
	alerts map[string]int
}

func (h *alertLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *alertLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *alertLog) WithGroup(string) slog.Handler            { return h }
func (h *alertLog) Handle(_ context.Context, r slog.Record) error {
	alert, agent := false, ""
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "alert":
			alert = a.Value.Kind() == slog.KindBool && a.Value.Bool()
		case "agent":
			agent = a.Value.String()
		}
		return true
	})
	if alert && r.Level == slog.LevelError {
		h.mu.Lock()
		h.alerts[agent]++
		h.mu.Unlock()
	}
	return nil
}

func (h *alertLog) count(agent string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alerts[agent]
}

func newTestAlerter(threshold int, window time.Duration, webhook string) (*Alerter, *fakeClock, *alertLog) {
	clk := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	lh := &alertLog{alerts: map[string]int{}}
	a := newAlerterT(nil, threshold, window, webhook, slog.New(lh))
	a.now = clk.now
	a.retryWait = 10 * time.Millisecond
	return a, clk, lh
}

// raisedBy counts the alerts each test alerter raised, by agent (what
// the worker's agentq_alerts_total counts through Options.Raised).
var (
	raisedMu sync.Mutex
	raisedBy = map[*Alerter]map[string]int{}
)

// newAlerterT is New with Options.Raised counted in raisedBy.
func newAlerterT(rdb redis.UniversalClient, threshold int, window time.Duration, webhook string, log *slog.Logger) *Alerter {
	counts := map[string]int{}
	a := New(rdb, Options{Threshold: threshold, Window: window, Webhook: webhook, Logger: log, Raised: func(agent string) {
		raisedMu.Lock()
		counts[agent]++
		raisedMu.Unlock()
	}})
	raisedMu.Lock()
	raisedBy[a] = counts
	raisedMu.Unlock()
	return a
}

func alertMetric(t *testing.T, a *Alerter, agent string) int {
	t.Helper()
	raisedMu.Lock()
	defer raisedMu.Unlock()
	return raisedBy[a][agent]
}

// TestAlerterThreshold: an alert fires once per window when an agent's
// failures within the window reach the threshold, never below it, and
// agents are counted apart.
func TestAlerterThreshold(t *testing.T) {
	t.Parallel()
	const window = time.Minute
	type step struct {
		agent string
		after time.Duration // clock advance before the failure
	}
	rep := func(agent string, n int, gap time.Duration) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = step{agent, gap}
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		threshold int
		steps     []step
		want      map[string]int
	}{
		{"below threshold", 3, rep("a", 2, time.Second), map[string]int{"a": 0}},
		{"at threshold", 3, rep("a", 3, time.Second), map[string]int{"a": 1}},
		{"far above threshold, one window", 3, rep("a", 50, time.Second), map[string]int{"a": 1}},
		{"spread out, never threshold within a window", 3, rep("a", 10, 31*time.Second), map[string]int{"a": 0}},
		{"old failures leave the window", 3, cat(rep("a", 2, time.Second), rep("a", 1, 2*window)), map[string]int{"a": 0}},
		{"once per window, again in the next", 3,
			cat(rep("a", 3, time.Second), rep("a", 3, time.Second), rep("a", 1, window), rep("a", 2, time.Second)),
			map[string]int{"a": 2}},
		{"continuous failures: one alert per window", 2, rep("a", 40, 10*time.Second), map[string]int{"a": 7}},
		{"agents counted apart", 3, cat(rep("a", 2, time.Second), rep("b", 2, time.Second), rep("a", 1, time.Second)),
			map[string]int{"a": 1, "b": 0}},
		{"threshold 0 is off", 0, rep("a", 100, time.Millisecond), map[string]int{"a": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, clk, lh := newTestAlerter(tc.threshold, window, "")
			for _, s := range tc.steps {
				clk.advance(s.after)
				a.Failure(s.agent)
			}
			for agent, n := range tc.want {
				require.Equal(t, n, lh.count(agent), "alert log lines of %s", agent)
				require.Equal(t, n, alertMetric(t, a, agent), "agentq_alerts_total of %s", agent)
			}
		})
	}
}

// TestAlerterNil: a nil alerter (alerts off) ignores failures.
func TestAlerterNil(t *testing.T) {
	t.Parallel()
	var a *Alerter
	require.NotPanics(t, func() { a.Failure("x") })
}

// webhook is an httptest server answering the given statuses in turn
// (the last repeats) and keeping the bodies it received.
type webhook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	calls  atomic.Int32
}

func newWebhook(t *testing.T, statuses ...int) *webhook {
	w := &webhook{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n := int(w.calls.Add(1))
		w.mu.Lock()
		w.bodies = append(w.bodies, b)
		w.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			rw.WriteHeader(http.StatusTeapot)
			return
		}
		rw.WriteHeader(statuses[min(n, len(statuses))-1])
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// TestAlerterWebhook: an alert is POSTed as a JSON summary; a failing
// webhook is tried three times in all, and not again after a success.
func TestAlerterWebhook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		statuses  []int
		wantCalls int
	}{
		{"first try succeeds", []int{http.StatusNoContent}, 1},
		{"two failures then success", []int{500, 503, 200}, 3},
		{"always failing: three tries", []int{500}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wh := newWebhook(t, tc.statuses...)
			a, clk, _ := newTestAlerter(2, time.Minute, wh.srv.URL)
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); a.Stop() }()
			a.Start(ctx)
			a.Failure("llm")
			clk.advance(time.Second)
			a.Failure("llm")

			require.Eventually(t, func() bool { return int(wh.calls.Load()) >= tc.wantCalls },
				5*time.Second, 5*time.Millisecond)
			// Retries wait 10 ms, 20 ms: well past them, no extra call came.
			time.Sleep(150 * time.Millisecond)
			require.Equal(t, tc.wantCalls, int(wh.calls.Load()))

			wh.mu.Lock()
			defer wh.mu.Unlock()
			for _, b := range wh.bodies {
				var got map[string]any
				require.NoError(t, json.Unmarshal(b, &got), string(b))
				require.Equal(t, "agent_failures", got["alert"])
				require.Equal(t, "llm", got["agent"])
				require.EqualValues(t, 2, got["failures"])
				require.EqualValues(t, 2, got["threshold"])
				require.Equal(t, "1m0s", got["window"])
				require.Equal(t, clk.now().UTC().Format(time.RFC3339Nano), got["at"])
			}
		})
	}
}

// hangingWebhook never answers until the test ends.
func hangingWebhook(t *testing.T) (*httptest.Server, *atomic.Int32) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, &calls
}

// TestAlerterHangingWebhookNeverBlocks: with a webhook that never answers,
// failure() still returns at once, for every one of 1000 alerts (the sender
// holds one, the queue 64, the rest are dropped and logged).
func TestAlerterHangingWebhookNeverBlocks(t *testing.T) {
	t.Parallel()
	srv, calls := hangingWebhook(t)
	a, clk, lh := newTestAlerter(1, time.Millisecond, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); a.Stop() }()
	a.Start(ctx)
	a.Failure("llm")
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the sender is stuck in the hanging webhook")

	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		for i := 0; i < 1000; i++ {
			clk.advance(time.Millisecond) // every failure opens a new window: 1000 alerts
			a.Failure("llm")
		}
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		// A POST made inline would take the client's 5 s timeout; generous bound.
		require.Less(t, d, 2*time.Second, "1000 failure() calls with a hanging webhook")
	case <-time.After(20 * time.Second):
		t.Fatal("failure() blocked on a hanging webhook")
	}
	require.Equal(t, 1001, lh.count("llm"), "every alert is still logged")
	require.Equal(t, int32(1), calls.Load(), "the webhook saw only the first POST so far")
}

// TestAlerterSenderNoLeak: the webhook sender goroutine and its connections
// end when the worker's context ends, even with a POST stuck in a hanging
// webhook. Not parallel: goleak needs a process without other tests'
// goroutines starting meanwhile.
func TestAlerterSenderNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			return // the second POST gets a 200 and leaves an idle keep-alive connection
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	a, clk, _ := newTestAlerter(1, time.Millisecond, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	a.Failure("a")
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	clk.advance(time.Second)
	a.Failure("b") // queued behind the stuck POST

	waited := make(chan struct{})
	cancel()
	go func() { a.Stop(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("alerter sender did not stop after its context ended")
	}

	// Also with a successful POST: its idle connection is closed on exit.
	b, clk2, _ := newTestAlerter(1, time.Millisecond, srv.URL)
	ctx2, cancel2 := context.WithCancel(context.Background())
	b.Start(ctx2)
	clk2.advance(time.Second)
	b.Failure("c")
	require.Eventually(t, func() bool { return calls.Load() >= 2 }, 5*time.Second, 5*time.Millisecond)
	cancel2()
	b.Stop()
}

// TestAlerterWebhookLogsHostOnly (issue #11, item 11): a failed webhook
// POST is logged with the webhook's host only, never its path, query or
// user info (a Slack webhook's path is its secret).
func TestAlerterWebhookLogsHostOnly(t *testing.T) {
	t.Parallel()
	const secret = "/services/T0SECRET/B0SECRET/XSECRETX?token=QSECRETQ"
	failing := newWebhook(t, http.StatusInternalServerError)
	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return l.Addr().String()
	}()
	for _, tc := range []struct {
		name, url, host, want string
	}{
		{"connection refused", "http://user:PSECRETP@" + dead + secret, dead, `msg="alert webhook failed" host=` + dead + " try=3"},
		{"error status", failing.srv.URL + secret, strings.TrimPrefix(failing.srv.URL, "http://"), `msg="alert webhook failed" host=` + strings.TrimPrefix(failing.srv.URL, "http://") + " try=3"},
		{"unparsable URL", "http://" + dead + "/XSECRETX/%zz?token=QSECRETQ", "", `msg="alert webhook: bad request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf syncBuffer
			a := newAlerterT(nil, 1, time.Minute, tc.url, slog.New(slog.NewTextHandler(&buf, nil)))
			a.retryWait = time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); a.Stop() }()
			a.Start(ctx)
			a.Failure("llm")
			require.Eventually(t, func() bool { return strings.Contains(buf.String(), tc.want) }, 10*time.Second, 5*time.Millisecond, buf.String())
			out := buf.String()
			require.NotContains(t, out, "SECRET", "the webhook's path, query or password leaked into the log")
			if tc.host != "" {
				require.Contains(t, out, "host="+tc.host)
			}
		})
	}
}
