package limit

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/resilience"
)

// limitStep is one step of a table test of the limiter: advance the clock,
// then do op and check its answer.
type limitStep struct {
	advance time.Duration
	op      string // admit | release (the n-th admission's lease) | restamp (the n-th admission's start) | debit | pause
	n       int64  // debit: tokens; pause: ms; release: index of the admission
	allowed bool
	limit   Kind
	retryIn time.Duration // checked when allowed is false and retryIn >= 0
}

// fakeClock is an injected decision clock (ms resolution, like the scripts).
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func TestLimiterTable(t *testing.T) {
	t.Parallel()
	per := time.Second
	win := per + RequestGuard(per) // 1050ms
	cases := []struct {
		name  string
		cfg   Config
		steps []limitStep
	}{
		{"requests: a sliding log, not a fixed window", Config{Requests: 3, Per: per}, []limitStep{
			{op: "admit", allowed: true},
			{advance: 100 * time.Millisecond, op: "admit", allowed: true},
			{advance: 100 * time.Millisecond, op: "admit", allowed: true},
			{advance: 100 * time.Millisecond, op: "admit", limit: Requests, retryIn: win - 300*time.Millisecond},
			// Just before the first start leaves the window: still full.
			{advance: win - 300*time.Millisecond - time.Millisecond, op: "admit", limit: Requests, retryIn: time.Millisecond},
			{advance: time.Millisecond, op: "admit", allowed: true},
			// The window now holds 100ms, 200ms and 1050ms: full until 100+1050.
			{op: "admit", limit: Requests, retryIn: 100 * time.Millisecond},
			{advance: 100 * time.Millisecond, op: "admit", allowed: true},
		}},
		{"concurrency: leases released or expired", Config{Concurrency: 2, Lease: 5 * time.Second}, []limitStep{
			{op: "admit", allowed: true},
			{op: "admit", allowed: true},
			{op: "admit", limit: Concurrency, retryIn: 0},
			{op: "release", n: 0},
			{op: "admit", allowed: true},
			{op: "admit", limit: Concurrency, retryIn: 0},
			// A killed worker's lease (admission 1, never released) expires.
			{advance: 5 * time.Second, op: "admit", allowed: true},
		}},
		{"tokens: debited after the call, refused at the limit", Config{Tokens: 100, Per: per}, []limitStep{
			{op: "admit", allowed: true},
			{op: "debit", n: 60},
			{advance: 200 * time.Millisecond, op: "admit", allowed: true},
			{op: "debit", n: 50},
			{advance: 100 * time.Millisecond, op: "admit", limit: Tokens, retryIn: 700 * time.Millisecond},
			{advance: 700 * time.Millisecond, op: "admit", allowed: true}, // 60 left the window: 50 used
			{op: "debit", n: 49},
			{op: "admit", allowed: true}, // 99 < 100
			{op: "debit", n: 1},
			{op: "admit", limit: Tokens, retryIn: 200 * time.Millisecond},
		}},
		{"pause: refuses everything, only ever extended", Config{Requests: 100, Per: per, Concurrency: 10}, []limitStep{
			{op: "pause", n: 2000},
			{op: "admit", limit: Paused, retryIn: 2 * time.Second},
			{op: "pause", n: 500}, // shorter: ignored
			{advance: 1500 * time.Millisecond, op: "admit", limit: Paused, retryIn: 500 * time.Millisecond},
			{advance: 500 * time.Millisecond, op: "admit", allowed: true},
		}},
		{"restamp: a start moved to when the call really left", Config{Requests: 2, Per: per}, []limitStep{
			{op: "admit", allowed: true},
			{advance: 100 * time.Millisecond, op: "admit", allowed: true},
			{advance: 400 * time.Millisecond, op: "restamp", n: 0}, // admission 0 left at 500ms
			{advance: 500 * time.Millisecond, op: "admit", limit: Requests, retryIn: 100*time.Millisecond + win - time.Second},
			{advance: 150 * time.Millisecond, op: "admit", allowed: true}, // the start at 100ms left the window; 500ms has not
			{op: "admit", limit: Requests, retryIn: 500*time.Millisecond + win - 1150*time.Millisecond},
			// A start already out of its window is not brought back.
			{advance: 2 * time.Second, op: "restamp", n: 1},
			{op: "admit", allowed: true},
			{op: "admit", allowed: true},
		}},
		{"requests and concurrency together", Config{Requests: 2, Per: per, Concurrency: 1}, []limitStep{
			{op: "admit", allowed: true},
			{op: "admit", limit: Concurrency},
			{op: "release", n: 0},
			{op: "admit", allowed: true},
			{op: "release", n: 1},
			{op: "admit", limit: Requests, retryIn: win},
		}},
	}
	for _, b := range redistest.Backends() {
		for _, tc := range cases {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				rdb, _ := b.New(t)
				clk := newFakeClock()
				l := New(rdb, WithClock(clk.Now))
				ctx := context.Background()
				var adms []Admission
				for i, s := range tc.steps {
					clk.Add(s.advance)
					switch s.op {
					case "admit":
						a, err := l.Admit(ctx, "k", tc.cfg)
						require.NoError(t, err, "step %d", i)
						require.Equal(t, s.allowed, a.Allowed, "step %d: %+v", i, a)
						if !s.allowed {
							require.Equal(t, s.limit, a.Limit, "step %d", i)
							require.Equal(t, s.retryIn, a.RetryIn, "step %d", i)
						} else {
							adms = append(adms, a)
						}
					case "release":
						require.NoError(t, l.Release(ctx, "k", adms[s.n]))
					case "restamp":
						require.NoError(t, l.Restamp(ctx, "k", tc.cfg, adms[s.n]))
					case "debit":
						_, err := l.Debit(ctx, "k", tc.cfg, s.n)
						require.NoError(t, err)
					case "pause":
						_, _, err := l.Pause(ctx, "k", time.Duration(s.n)*time.Millisecond, "test")
						require.NoError(t, err)
					}
				}
			})
		}
	}
}

func TestLimiterStatus(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			clk := newFakeClock()
			l := New(rdb, WithClock(clk.Now))
			ctx := context.Background()
			cfg := Config{Requests: 5, Tokens: 1000, Per: time.Minute, Concurrency: 3}
			require.NoError(t, l.Register(ctx, "openai-prod", cfg))
			for range 3 {
				a, err := l.Admit(ctx, "openai-prod", cfg)
				require.NoError(t, err)
				require.True(t, a.Allowed)
			}
			a, err := l.Admit(ctx, "openai-prod", cfg)
			require.NoError(t, err)
			require.Equal(t, Concurrency, a.Limit)
			_, err = l.Debit(ctx, "openai-prod", cfg, 120)
			require.NoError(t, err)
			until, extended, err := l.Pause(ctx, "openai-prod", 2*time.Second, "provider: x")
			require.NoError(t, err)
			require.True(t, extended)

			st, err := l.Status(ctx, "openai-prod")
			require.NoError(t, err)
			require.Equal(t, cfg, Config{Requests: st.Requests, Tokens: st.Tokens, Per: st.Per, Concurrency: st.Concurrency})
			require.Equal(t, "1m0s", st.PerText)
			require.EqualValues(t, 3, st.RequestsInWindow)
			require.EqualValues(t, 120, st.TokensInWindow)
			require.EqualValues(t, 3, st.InFlight)
			require.NotNil(t, st.PausedUntil)
			require.Equal(t, until, *st.PausedUntil)
			require.Equal(t, "provider: x", st.PauseReason)
			require.EqualValues(t, 1, st.Refusals[Concurrency])

			keys, err := l.Keys(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"openai-prod"}, keys)

			clk.Add(time.Minute + time.Second)
			st, err = l.Status(ctx, "openai-prod")
			require.NoError(t, err)
			require.Zero(t, st.RequestsInWindow)
			require.Zero(t, st.TokensInWindow)
			require.Zero(t, st.InFlight, "leases of 60s expired")
			require.Nil(t, st.PausedUntil)
		})
	}
}

// TestLimiterConcurrentClients: many goroutines with their own clients
// admit against one key on a real redis-server with its own clock; the
// starts they were admitted at never exceed the limit in any window, and
// the in-flight count never exceeds the concurrency.
func TestLimiterConcurrentClients(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg := Config{Requests: 10, Per: 200 * time.Millisecond, Concurrency: 3, Lease: 10 * time.Second}
	var (
		mu       sync.Mutex
		starts   []span // each admission lies within its span
		inFlight int
		maxSeen  int
	)
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := New(srv.Client())
			ctx := context.Background()
			for time.Now().Before(deadline) {
				before := time.Now()
				a, err := l.Admit(ctx, "shared", cfg)
				after := time.Now()
				if err != nil {
					t.Error(err)
					return
				}
				if !a.Allowed {
					time.Sleep(max(a.RetryIn, 2*time.Millisecond))
					continue
				}
				mu.Lock()
				starts = append(starts, span{before, after})
				inFlight++
				maxSeen = max(maxSeen, inFlight)
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				mu.Lock()
				inFlight--
				mu.Unlock()
				if err := l.Release(ctx, "shared", a); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, maxSeen, cfg.Concurrency)
	require.Greater(t, len(starts), 20, "the limiter admitted calls")
	requireNoCrowdedWindow(t, starts, cfg.Requests, cfg.Per)
}

// span bounds when one admission happened: the limiter decided on Redis's
// clock (this machine's) at some moment between before and after its
// Admit call. Timestamps taken after Admit returns can lag it by any
// scheduling delay on a loaded machine, so they prove nothing.
type span struct{ before, after time.Time }

// requireNoCrowdedWindow fails when some requests+1 admissions must have
// fallen within less than per of each other, whatever their true moments
// inside their spans: a set S is crowded when max(after) - min(before) <
// per over S. For each admission i taken as the earliest-starting member,
// the best candidates are the requests+1 earliest-ending spans among those
// starting no earlier than i's.
func requireNoCrowdedWindow(t *testing.T, spans []span, requests int, per time.Duration) {
	t.Helper()
	for i := range spans {
		var ends []time.Time
		for j := range spans {
			if !spans[j].before.Before(spans[i].before) {
				ends = append(ends, spans[j].after)
			}
		}
		if len(ends) <= requests {
			continue
		}
		sort.Slice(ends, func(a, b int) bool { return ends[a].Before(ends[b]) })
		last := ends[requests] // the (requests+1)-th earliest end
		require.GreaterOrEqual(t, last.Sub(spans[i].before), per,
			"%d admissions certainly within %s of each other (from the one whose Admit began at %s)", requests+1, per, spans[i].before.Format(time.StampMicro))
	}
}

func TestExhaustedFor(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name   string
		status int
		h      http.Header
		want   time.Duration
	}{
		{"openai requests", 200, h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2s"), 2 * time.Second},
		{"openai requests left", 200, h("x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "2s"), 0},
		{"openai tokens 6m0s", 200, h("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"), 6 * time.Minute},
		{"openai ms", 200, h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "20ms"), 20 * time.Millisecond},
		{"longest of two", 200, h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "3s"), 3 * time.Second},
		{"anthropic", 200, h("anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", now.Add(5*time.Second).Format(time.RFC3339)), 5 * time.Second},
		{"anthropic input tokens", 200, h("anthropic-ratelimit-input-tokens-remaining", "0",
			"anthropic-ratelimit-input-tokens-reset", now.Add(7*time.Second).Format(time.RFC3339)), 7 * time.Second},
		{"anthropic reset in the past", 200, h("anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", now.Add(-time.Second).Format(time.RFC3339)), 0},
		{"429 retry-after seconds", 429, h("Retry-After", "4"), 4 * time.Second},
		{"429 retry-after-ms", 429, h("retry-after-ms", "1500"), 1500 * time.Millisecond},
		{"503 retry-after is not a limit", 503, h("Retry-After", "4"), 0},
		{"429 without header", 429, nil, 0},
		{"capped", 200, h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "100h"), MaxPause},
		{"garbage reset", 200, h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "soon"), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, why, ok := ExhaustedFor(tc.status, tc.h, now)
			require.Equal(t, tc.want, d)
			require.Equal(t, tc.want > 0, ok)
			if ok {
				require.NotEmpty(t, why)
			}
		})
	}
}

// TestExhaustedForAllocatesNothingOnAPlainReply: ExhaustedFor reads every
// agent reply; a reply without limit headers costs it no allocation (the
// header names are canonical constants, a reason is formatted only for a
// pause kept). Not parallel: AllocsPerRun counts the whole process.
func TestExhaustedForAllocatesNothingOnAPlainReply(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "X-Ratelimit-Remaining-Requests": {"12"}}
	now := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, ok := ExhaustedFor(200, h, now); ok {
			t.Fatal("a plain reply is not exhausted")
		}
	})
	require.Zero(t, allocs)
}

// TestExhaustedForReadsOnlyBackPressureHeaders: every header ExhaustedFor
// reads is on resilience's back-pressure allowlist, the one list an exec
// agent's ActionResponse headers are cut down to, so that an exec agent's
// reply pauses a key exactly as an HTTP agent's does.
func TestExhaustedForReadsOnlyBackPressureHeaders(t *testing.T) {
	t.Parallel()
	read := []string{"Retry-After", "Retry-After-Ms"}
	for _, l := range append(append([]providerLimit(nil), openAILimits...), anthropicLimits...) {
		read = append(read, l.remaining, l.reset)
	}
	for _, name := range read {
		require.True(t, resilience.BackPressureHeader(name), name)
	}
}

// TestLimitKeysShareOneSlot: a limits key's Redis keys share one hash tag,
// so its scripts run on Redis Cluster.
func TestLimitKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"openai-prod", "a:b", "llm.example"} {
		keys := limitKeys(key)
		require.Len(t, keys, 4)
		for _, k := range keys {
			require.Contains(t, k, "{limit:"+key+"}")
			require.Equal(t, 1, strings.Count(k, "{"), k)
		}
	}
}

// TestLimiterLeaseExpires: on a real redis-server's clock, a concurrency
// slot held by a caller that never releases it (a killed worker) frees
// itself when its lease ends, not before.
func TestLimiterLeaseExpires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := New(srv.Client())
	ctx := context.Background()
	cfg := Config{Concurrency: 1, Lease: 300 * time.Millisecond}
	a, err := l.Admit(ctx, "k", cfg)
	require.NoError(t, err)
	require.True(t, a.Allowed)
	held := time.Now()
	deadline := held.Add(5 * time.Second)
	for {
		b, err := l.Admit(ctx, "k", cfg)
		require.NoError(t, err)
		if b.Allowed {
			break
		}
		require.Equal(t, Concurrency, b.Limit)
		require.True(t, time.Now().Before(deadline), "the lease never expired")
		time.Sleep(10 * time.Millisecond)
	}
	require.GreaterOrEqual(t, time.Since(held), 250*time.Millisecond, "the slot stayed taken for its lease")
}

// TestLimiterUnavailableRefuses: without Redis the limits cannot be
// checked, so Admit refuses (limit unavailable) rather than admit over
// them, and says why.
func TestLimiterUnavailableRefuses(t *testing.T) {
	t.Parallel()
	// A socket nothing listens on: a killed server's port may be taken by
	// another test's redis-server before Admit dials it.
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "no-redis.sock"), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	a, err := New(rdb).Admit(context.Background(), "k", Config{Concurrency: 1})
	require.ErrorIs(t, err, ErrUnavailable)
	require.False(t, a.Allowed)
	require.Equal(t, Unavailable, a.Limit)
	require.Equal(t, UnavailableRetry, a.RetryIn)
}
